"""Write ``<model_tag>-tuning.md`` and ``<model_tag>-tuning.html`` for a study.

When that file holds the report of another study with the same model_tag, the report is written as
``<model_tag>-<study>-tuning.md`` / ``.html`` instead: two studies reported into one folder never overwrite each other.
"""

from __future__ import annotations

import re
from pathlib import Path

from flagopt.errors import FlagoptError
from flagopt.report._figures import draw, figure_data
from flagopt.report._html import render_html
from flagopt.report._markdown import render_markdown
from flagopt.report._sections import report_data
from flagopt.study import StudyData

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def report_stem(model_tag: str) -> str:
    """A file name from the model tag (``llama3/8b`` -> ``llama3_8b-tuning``).

    Example:
        >>> report_stem("llama3/8b")
        'llama3_8b-tuning'
    """
    return f"{_UNSAFE.sub('_', model_tag).strip('._') or 'study'}-tuning"


#: the last line of every report: which study wrote the file (an HTML comment, invisible when rendered)
_MARK = "<!-- flagopt report of study "


def _written_for_another_study(md: Path, study: str) -> bool:
    try:
        lines = md.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()
    except OSError:
        return False
    last = lines[-1] if lines else ""
    return last.startswith(_MARK) and last != f"{_MARK}{study} -->"


def write_report(data: StudyData, out_dir: str | Path, *, storage_hint: str | None = None) -> tuple[Path, Path]:
    """Write the markdown report and the HTML page into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    rep = report_data(data, storage_hint=storage_hint)
    stem = report_stem(rep.model_tag)
    if _written_for_another_study(out / f"{stem}.md", data.name):
        stem = report_stem(f"{rep.model_tag}-{data.name}")  # two studies of one model_tag: never overwrite
    md, page = out / f"{stem}.md", out / f"{stem}.html"
    markdown = render_markdown(rep) + f"\n{_MARK}{data.name} -->\n"
    page_text = render_html(rep, draw(figure_data(data)), markdown_name=md.name)
    try:
        out.mkdir(parents=True, exist_ok=True)
        md.write_text(markdown, encoding="utf-8")
        page.write_text(page_text, encoding="utf-8")
    except OSError as exc:
        raise FlagoptError(str(out), None, f"cannot write the report: {exc.strerror}") from None
    return md, page
