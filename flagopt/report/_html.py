"""A self-contained HTML page: the report's summary and its plotly figures, plotly.js embedded once, inline."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from flagopt.report._content import ReportData

_STYLE = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
          "code{background:#f3f3f3;padding:0 .2em}li{margin:.3em 0}.fig{margin:2em 0}")


def _inline_md(text: str) -> str:
    """Escape, then turn ``**bold**`` and ```code``` into tags (the only markup the summary lines use)."""
    out, parts = [], text.split("`")
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            bold = html.escape(part).split("**")
            out.append("".join(f"<b>{b}</b>" if j % 2 else b for j, b in enumerate(bold)))
    return "".join(out)


def render_html(rep: ReportData, figures: dict[str, go.Figure], markdown_name: str | None = None) -> str:
    """The page; opens offline (no script is fetched from anywhere)."""
    head = f"{rep.model_tag} tuning report"
    body = [f"<h1>{html.escape(head)}</h1>", "<ul>"]
    body += [f"<li><b>{html.escape(k)}</b>: {_inline_md(v)}</li>" for k, v in rep.header]
    body.append("</ul>")
    if markdown_name:
        body.append(f'<p>Full report: <a href="{html.escape(markdown_name, quote=True)}">{html.escape(markdown_name)}</a></p>')
    body += ["<h2>TL;DR</h2>", "<ul>", *(f"<li>{_inline_md(line)}</li>" for line in rep.tldr), "</ul>",
             f"<p>{_inline_md(rep.env_effect)}</p>"]
    first = True
    for key, fig in figures.items():
        div = fig.to_html(full_html=False, include_plotlyjs=True if first else False, div_id=f"fig-{key}")
        body.append(f'<div class="fig" id="panel-{html.escape(key, quote=True)}">{div}</div>')
        first = False
    if rep.export_text:
        body += ["<h2>Recommended deployment</h2>", f"<pre>{html.escape(rep.export_text)}</pre>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(head)}</title><style>{_STYLE}</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")
