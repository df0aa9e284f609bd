"""Score each strategy's choices against the landscape's truth and summarise them per landscape and strategy.

Definitions (the write-up quotes them):

* **runs** — launches until the decision: flagopt's stop verdict (baselines, controls and repeats included),
  the other strategies' whole budget.
* **within 1 %** — the chosen configuration's true throughput is at least 99 % of the true best's
  (``(1 + g) / (1 + g_best) >= 0.99``; ``Landscape.best()``).
* **regret** — ``g_best - g`` in percentage points of the baseline.
* **false winner** — flagopt: it recommends a configuration (a ``win`` verdict, or a confirmed ``better`` arm at
  the budget) whose true gain is below ``null_gain`` (2 %); the others: they claim a gain of at least 2 % for a
  choice whose true gain is below 2 %.

Example:
    >>> r = SeedResult("null", "random", 0, runs=20, true_gain=0.0, best_gain=0.0, claimed_gain=0.031)
    >>> r.false_winner, r.within_1pct
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NULL_GAIN = 0.02
WITHIN = 0.01


@dataclass(frozen=True)
class SeedResult:
    """One strategy on one landscape with one seed."""

    landscape: str
    strategy: str
    seed: int
    runs: int
    true_gain: float
    best_gain: float
    claimed_gain: float
    verdict: str | None = None  # flagopt's stop reason; None for the other strategies
    recommends: bool | None = None  # flagopt: did it name a confirmed configuration?
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def within_1pct(self) -> bool:
        return (1.0 + self.true_gain) / (1.0 + self.best_gain) >= 1.0 - WITHIN - 1e-12

    @property
    def regret(self) -> float:
        return self.best_gain - self.true_gain

    @property
    def false_winner(self) -> bool:
        if self.verdict is not None:
            return bool(self.recommends) and self.true_gain < NULL_GAIN
        return self.claimed_gain >= NULL_GAIN and self.true_gain < NULL_GAIN

    @property
    def false_winner_familywise(self) -> bool:
        """flagopt's false winner had a budget pick needed a positive lower bound at the family-wise confidence."""
        if self.verdict == "win" or not self.false_winner:
            return self.false_winner
        lo = self.detail.get("winner_lo_familywise")
        return lo is not None and lo > 0.0


@dataclass(frozen=True)
class Summary:
    """One landscape x strategy over its seeds."""

    landscape: str
    strategy: str
    seeds: int
    runs_median: float
    runs_q25: float
    runs_q75: float
    within_1pct: float
    regret_mean: float
    regret_median: float
    false_winner: float
    false_winner_familywise: float
    claimed_mean: float
    true_mean: float
    verdicts: dict[str, int]


def summarise(results: Sequence[SeedResult]) -> list[Summary]:
    """One :class:`Summary` per (landscape, strategy), in first-seen order."""
    groups: dict[tuple[str, str], list[SeedResult]] = {}
    for r in results:
        groups.setdefault((r.landscape, r.strategy), []).append(r)
    out = []
    for (land, strategy), rs in groups.items():
        runs = np.array([r.runs for r in rs], dtype=float)
        regret = np.array([r.regret for r in rs])
        verdicts: dict[str, int] = {}
        for r in rs:
            if r.verdict is not None:
                verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
        out.append(Summary(
            landscape=land, strategy=strategy, seeds=len(rs), runs_median=float(np.median(runs)),
            runs_q25=float(np.percentile(runs, 25)), runs_q75=float(np.percentile(runs, 75)),
            within_1pct=float(np.mean([r.within_1pct for r in rs])), regret_mean=float(regret.mean()),
            regret_median=float(np.median(regret)), false_winner=float(np.mean([r.false_winner for r in rs])),
            false_winner_familywise=float(np.mean([r.false_winner_familywise for r in rs])),
            claimed_mean=float(np.mean([r.claimed_gain for r in rs])),
            true_mean=float(np.mean([r.true_gain for r in rs])), verdicts=verdicts))
    return out


@dataclass(frozen=True)
class TargetCheck:
    """One of the issue's targets, measured."""

    name: str
    target: str
    measured: str
    met: bool


def check_targets(summaries: Sequence[Summary]) -> list[TargetCheck]:
    """The issue's targets for flagopt: win10 decided in <= 20 runs and within 1 % in >= 90 %; null <= 5 % false."""
    by_key = {(s.landscape, s.strategy): s for s in summaries}
    out = []
    win = by_key.get(("win10", "flagopt"))
    if win is not None:
        decided = win.verdicts.get("win", 0) / win.seeds
        out.append(TargetCheck("win10: runs to a confirmed decision (median)", "<= 20",
                               f"{win.runs_median:g} (win verdict in {decided:.0%} of seeds)",
                               win.runs_median <= 20 and decided >= 0.5))
        out.append(TargetCheck("win10: choice within 1 % of the true best", ">= 90 % of seeds",
                               f"{win.within_1pct:.0%}", win.within_1pct >= 0.90))
    null = by_key.get(("null", "flagopt"))
    if null is not None:
        out.append(TargetCheck("null: false winner", "<= 5 % of seeds", f"{null.false_winner:.0%}",
                               null.false_winner <= 0.05))
        out.append(TargetCheck("null: false winner if a budget pick needed the family-wise bound (proposed rule)",
                               "<= 5 % of seeds", f"{null.false_winner_familywise:.0%}",
                               null.false_winner_familywise <= 0.05))
    return out
