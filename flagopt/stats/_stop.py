"""When a study stops: a confirmed winner, a negative finding, or the budget."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from flagopt.stats._verdict import ArmEstimate

StopReason = Literal["win", "null", "budget"]


@dataclass(frozen=True)
class StopDecision:
    """Why the study stops, which arm it names (the winner, or the best seen) and a sentence for people."""

    reason: StopReason
    arm: str | None
    detail: str


def win_confidence(confidence: float, n_candidates: int) -> float:
    """Bonferroni: the two-sided confidence each of ``n_candidates`` raced arms must reach for a family-wise one.

    Example:
        >>> round(win_confidence(0.95, 5), 3)
        0.99
    """
    return 1.0 - (1.0 - confidence) / max(1, n_candidates)


def _best(arms: Mapping[str, ArmEstimate]) -> str | None:
    finite = {k: v for k, v in arms.items() if math.isfinite(v.gain)}
    return max(finite, key=lambda k: (finite[k].gain, k)) if finite else None


def evaluate_stop(
    arms: Mapping[str, ArmEstimate],
    *,
    win: float = 0.05,
    null_gain: float = 0.02,
    max_null: int = 25,
    n_distinct: int,
    trials_used: int,
    max_trials: int,
    confidence: float = 0.95,
    min_runs: int = 2,
    max_runs: int = 8,
) -> StopDecision | None:
    """Decide whether the study is done.

    * ``win``: an arm with at least ``min_runs`` runs whose lower bound, at a confidence Bonferroni-corrected over
      every arm that was raced (re-run at least once), is at least ``win``.
    * ``null``: at least ``max_null`` distinct profiles/configurations evaluated, none confirmed better by
      ``null_gain``, and none still open (point estimate at or above ``null_gain``, upper bound too, runs left).
    * ``budget``: ``trials_used >= max_trials``.

    Args:
        arms: per-configuration estimates (baselines excluded), computed at ``confidence``.
        n_distinct: distinct configurations evaluated so far (profiles and sampled points).

    Example:
        >>> arms = {"pipelined": ArmEstimate(gain=0.11, lo=0.09, hi=0.13, n=4, sigma=0.01, se=0.004, df=12)}
        >>> evaluate_stop(arms, n_distinct=3, trials_used=20, max_trials=100).reason
        'win'
    """
    raced = sum(1 for est in arms.values() if est.n >= 2)
    conf = win_confidence(confidence, raced)
    winners = {}
    for name, est in arms.items():
        if est.n < min_runs:
            continue
        lo, _ = est.bounds(conf) if est.se > 0 else (est.lo, est.hi)
        if lo >= win:
            winners[name] = lo
    if winners:
        name = max(winners, key=lambda k: (winners[k], k))
        est = arms[name]
        return StopDecision(
            "win",
            name,
            f"{name}: gain {est.gain:+.1%} with lower bound {winners[name]:+.1%} >= {win:.0%} "
            f"at {conf:.2%} confidence (Bonferroni over {max(raced, 1)} raced arms), n={est.n}",
        )
    if trials_used >= max_trials:
        best = _best(arms)
        tail = f"; best seen {best} ({arms[best].gain:+.1%}, n={arms[best].n})" if best else ""
        return StopDecision("budget", best, f"budget of {max_trials} trials used{tail}")
    if n_distinct >= max_null:
        better = [k for k, e in arms.items() if e.n >= min_runs and e.lo > 0 and e.gain >= null_gain]
        open_ = [k for k, e in arms.items() if e.gain >= null_gain and e.hi >= null_gain and e.n < max_runs]
        if not better and not open_:
            best = _best(arms)
            return StopDecision(
                "null",
                best,
                f"{n_distinct} distinct configurations evaluated, none better than the baseline by "
                f"{null_gain:.0%}: keep the deployed configuration",
            )
    return None
