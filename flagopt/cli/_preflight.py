"""The pre-flight flag check shared by ``validate --preflight`` and ``run``."""

from __future__ import annotations

from rich.console import Console

from flagopt.space import Space


def run_preflight(space: Space, out: Console, *, before_run: bool = False) -> int:
    try:
        from flagopt.flags import preflight_space
    except ImportError:
        out.print("pre-flight: skipped (flag registry not available)")
        return 0
    report = preflight_space(space)
    out.print(report.summary())
    if report.status == "failed":
        if before_run:
            out.print("fix the space (or pass --no-preflight to run anyway; the unknown flags abort every trial)")
        return 2
    return 0
