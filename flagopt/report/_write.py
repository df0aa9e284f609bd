"""Write ``<model_tag>-tuning.md`` and ``<model_tag>-tuning.html`` for a study."""

from __future__ import annotations

import re
from pathlib import Path

from flagopt.errors import FlagoptError
from flagopt.report._data import StudyData
from flagopt.report._figures import draw, figure_data
from flagopt.report._html import render_html
from flagopt.report._markdown import render_markdown
from flagopt.report._sections import report_data

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def report_stem(model_tag: str) -> str:
    """A file name from the model tag (``llama3/8b`` -> ``llama3_8b-tuning``).

    Example:
        >>> report_stem("llama3/8b")
        'llama3_8b-tuning'
    """
    return f"{_UNSAFE.sub('_', model_tag).strip('._') or 'study'}-tuning"


def write_report(data: StudyData, out_dir: str | Path, *, storage_hint: str | None = None) -> tuple[Path, Path]:
    """Write the markdown report and the HTML page into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    rep = report_data(data, storage_hint=storage_hint)
    stem = report_stem(rep.model_tag)
    md, page = out / f"{stem}.md", out / f"{stem}.html"
    markdown = render_markdown(rep)
    page_text = render_html(rep, draw(figure_data(data)), markdown_name=md.name)
    try:
        out.mkdir(parents=True, exist_ok=True)
        md.write_text(markdown, encoding="utf-8")
        page.write_text(page_text, encoding="utf-8")
    except OSError as exc:
        raise FlagoptError(str(out), None, f"cannot write the report: {exc.strerror}") from None
    return md, page
