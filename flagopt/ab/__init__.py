"""A/B of env.sh patches against the deployed job, interleaved so drift cancels (``flagopt ab``).

The deployed job (A) and each patch run once per round, in Latin-square order, through the study's own executor;
every run is collected and classified as a study's would be and recorded in ``<study folder>/ab/<id>.json``
(schema ``flagopt.ab/1``, docs/report.md), which is also what a re-run of the same command resumes.

Example:
    >>> from flagopt.ab import paired
    >>> paired([102.0, 101.5, 102.2, 101.8], [100.0, 100.1, 99.9, 100.0], "maximize").verdict
    'better'
"""

from __future__ import annotations

from flagopt.ab._design import round_order, williams_rows
from flagopt.ab._estimate import (
    BETTER,
    FAILS,
    SAME,
    TOO_FEW,
    WORSE,
    Estimate,
    agreement,
    paired,
    pct,
)
from flagopt.ab._record import (
    DONE,
    RUNNING,
    SCHEMA,
    STOPPED,
    AbRecord,
    find_resumable,
    load_records,
    patch_key,
    record_key,
    sha256_of,
)
from flagopt.ab._runner import SOURCE_THEN_EXEC, AbRunner, AbStopped, patch_copy
from flagopt.ab._stragglers import slow_runs
from flagopt.ab._summary import summarize, values_by_round
from flagopt.ab._text import arm_lines, round_table

__all__ = [
    "BETTER", "DONE", "FAILS", "RUNNING", "SAME", "SCHEMA", "SOURCE_THEN_EXEC", "STOPPED", "TOO_FEW", "WORSE",
    "AbRecord", "AbRunner", "AbStopped", "Estimate", "agreement", "arm_lines", "find_resumable", "load_records",
    "paired", "patch_copy", "patch_key", "pct", "record_key", "round_order", "round_table", "sha256_of", "slow_runs",
    "summarize",
    "values_by_round", "williams_rows",
]
