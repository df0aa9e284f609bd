"""The report's content as plain data: the leaderboard rows, failure groups, sign flips and the whole report.

The builders in :mod:`flagopt.report._sections` fill these from a study; the markdown and HTML renderers print them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Row:
    """One leaderboard line."""

    trial: int
    profile: str
    flags: str
    steady: float | None
    step_s: float | None
    delta_pct: float | None
    ci_pct: tuple[float, float] | None
    verdict: str
    runs: int
    winner: bool = False


@dataclass(frozen=True)
class FailureGroup:
    failure_class: str
    count: int
    examples: tuple[str, ...]


@dataclass(frozen=True)
class SignFlip:
    """One configuration measured in two cells (same model, other parallelism)."""

    flags: str
    here_pct: float
    here_ci: tuple[float, float]
    other_cell: str
    other_pct: float
    other_ci: tuple[float, float]
    flipped: str  # "" | "flip" | "confirmed flip"


@dataclass(frozen=True)
class ReportData:
    """Everything the markdown and HTML renderers print; computed once from a :class:`StudyData`."""

    study: str
    model_tag: str
    parallelism: str
    metric: str
    header: tuple[tuple[str, str], ...]
    command: str
    tldr: tuple[str, ...]
    inventory: tuple[tuple[str, str, str], ...]
    env_effect: str
    top: tuple[Row, ...]
    bottom: tuple[Row, ...]
    negative: tuple[str, ...]
    failures: tuple[FailureGroup, ...]
    appendix: tuple[dict[str, Any], ...]
    sign_flips: tuple[SignFlip, ...] = ()
    other_cells: tuple[str, ...] = ()
    export_text: str = ""
    export_note: str = ""
    winner_trial: int | None = None
    bubble: tuple[Any, ...] = ()  # (stages, arg, rows) for pipeline studies
    ab: tuple[str, ...] = ()  # `flagopt ab` records of this study (markdown list lines)
    #: sentences under the leaderboard: the winner's fresh runs, drift correction where raw and Δ% disagree, the sign
    board_notes: tuple[str, ...] = ()
