"""The study report: markdown (``<model_tag>-tuning.md``) and a self-contained HTML page of plotly figures.

Example:
    >>> from flagopt.report import study_data, write_report
    >>> paths = write_report(study_data(None, "demo"), "reports")  # doctest: +SKIP
"""

from __future__ import annotations

from flagopt.report._data import StudyData, is_nan, noise_of, other_cells, study_data, study_data_of

__all__ = ["StudyData", "is_nan", "noise_of", "other_cells", "study_data", "study_data_of"]
