"""Where the next repeat goes: the arm whose next run is most likely to change the study's decision."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from flagopt.stats._verdict import ArmEstimate


def _targets(target: float | Sequence[float]) -> tuple[float, ...]:
    return (float(target),) if isinstance(target, (int, float)) else tuple(float(x) for x in target)


def next_to_sample(
    arms: Mapping[str, ArmEstimate],
    *,
    target: float | Sequence[float],
    min_runs: int = 2,
    max_runs: int = 8,
    slack: float = 0.5,
) -> str | None:
    """Pick the arm to re-run next, racing arms against the decision thresholds (LUCB / APT style).

    The study asks "is this arm's gain above ``target``?" (``stop.null_gain``, ``stop.win``, or both). An arm whose
    interval lies wholly on one side of every target is decided and gets no more runs; so is one whose point
    estimate sits more than ``slack`` half-widths below every target it straddles (it cannot change the stop
    decision, which looks at arms whose estimate reaches a target); an arm whose point estimate reaches a target
    but has fewer than ``min_runs`` runs is not decided. Among the undecided arms with fewer than
    ``max_runs`` runs the one with the smallest ``|gain - target| / half-width`` (closest to the threshold, in units
    of its own uncertainty, as in the APT threshold bandit) runs next; ties go to the higher gain. Arms far below
    every target are never repeated, so repeats go where they can change the outcome, not uniformly.

    Returns:
        the arm's name, or ``None`` when every arm is decided or out of runs.

    Example:
        >>> arms = {
        ...     "a": ArmEstimate(gain=0.060, lo=0.050, hi=0.070, n=4, sigma=0.01),  # decided above 0.02
        ...     "b": ArmEstimate(gain=0.025, lo=0.005, hi=0.045, n=2, sigma=0.01),  # straddles 0.02
        ...     "c": ArmEstimate(gain=-0.03, lo=-0.05, hi=-0.01, n=1, sigma=0.01),  # decided below
        ... }
        >>> next_to_sample(arms, target=0.02)
        'b'
    """
    levels = _targets(target)
    best: tuple[float, float, str] | None = None
    for name, est in arms.items():
        if est.n >= max_runs or not math.isfinite(est.gain):
            continue
        half = max((est.hi - est.lo) / 2.0, 1e-12)
        straddles = [x for x in levels if est.lo < x < est.hi and est.gain >= x - slack * half]
        unconfirmed = [x for x in levels if est.gain >= x and est.n < min_runs]
        candidates = straddles + unconfirmed
        if not candidates:
            continue
        score = min(abs(est.gain - x) for x in candidates) / half
        key = (score, -est.gain, name)
        if best is None or key < best:
            best = key
    return None if best is None else best[2]
