"""The study report: markdown (``<model_tag>-tuning.md``) and a self-contained HTML page of plotly figures.

Example:
    >>> from flagopt.report import study_data, write_report
    >>> md, page = write_report(study_data(None, "demo"), "reports")  # doctest: +SKIP
"""

from __future__ import annotations

from flagopt.report._figures import STRAGGLER, FigureData, GainBar, Point, Trace, draw, figure_data, importances
from flagopt.report._html import render_html
from flagopt.report._markdown import cell, code, render_markdown
from flagopt.report._content import FailureGroup, ReportData, Row, SignFlip
from flagopt.report._sections import failures_of, report_data, rows_of
from flagopt.report._status import StudyStatus, study_status
from flagopt.report._write import report_stem, write_report

# The read model lives in flagopt.study; re-exported so that `from flagopt.report import study_data` keeps working.
from flagopt.study import StudyData, is_nan, noise_of, other_cells, study_data, study_data_of

__all__ = [
    "STRAGGLER", "FailureGroup", "FigureData", "GainBar", "Point", "ReportData", "Row", "SignFlip", "StudyData", "StudyStatus",
    "Trace", "cell", "code", "draw", "failures_of", "figure_data", "importances", "is_nan", "noise_of", "other_cells",
    "render_html", "render_markdown", "report_data", "report_stem", "rows_of", "study_data", "study_data_of",
    "study_status", "write_report",
]
