"""The A/B statistics (pure): a patch's gain over the deployed job, its 95 % interval, the verdict, the agreement.

Each round runs the deployed job (A) and every patch once, close together in time. For a patch, the figure of a
round is the log-ratio of its steady value to A's in the same round (signed so that positive is better), so the
slow drift of the machine cancels inside the round. The gain is ``exp(mean) - 1`` and its interval the 95 %
t-interval of the mean log-ratio over the rounds, mapped the same way: runs no study selected, so nothing in it is
biased by a choice (docs/report.md, "flagopt ab").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

LEVEL = 0.95
BETTER, SAME, WORSE, FAILS, TOO_FEW = "better", "no difference", "worse", "fails", "too few pairs"


@dataclass(frozen=True)
class Estimate:
    """A paired comparison of one arm against another over the rounds where both have a value."""

    gain: float | None  # exp(mean log-ratio) - 1; positive is better whatever the metric's direction
    lo: float | None
    hi: float | None
    pairs: int
    pair_gains: tuple[float, ...]
    verdict: str

    def to_json(self) -> dict[str, object]:
        return {"gain": self.gain, "ci": None if self.lo is None else [self.lo, self.hi], "pairs": self.pairs,
                "pair_gains": list(self.pair_gains), "verdict": self.verdict}


def log_ratio(value: float, reference: float, direction: str) -> float:
    """``log(value / reference)`` for a metric to maximize, ``log(reference / value)`` for one to minimize."""
    ratio = value / reference if direction == "maximize" else reference / value
    return math.log(ratio)


def paired(values: Sequence[float | None], references: Sequence[float | None], direction: str) -> Estimate:
    """The gain of ``values`` over ``references`` (one of each per round; ``None`` where a run has no value).

    Example:
        >>> e = paired([110.0, 111.0, 109.0], [100.0, 100.0, 100.0], "maximize")
        >>> round(e.gain, 3), e.verdict
        (0.1, 'better')
    """
    logs = [log_ratio(v, r, direction) for v, r in zip(values, references) if v is not None and r is not None]
    gains = tuple(math.expm1(x) for x in logs)
    n = len(logs)
    if n == 0:
        return Estimate(None, None, None, 0, gains, TOO_FEW)
    mean = sum(logs) / n
    if n < 2:
        return Estimate(math.expm1(mean), None, None, n, gains, TOO_FEW)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = float(stats.t.ppf(0.5 + LEVEL / 2, n - 1)) * sd / math.sqrt(n)
    lo, hi = math.expm1(mean - half), math.expm1(mean + half)
    verdict = BETTER if lo > 0 else WORSE if hi < 0 else SAME
    return Estimate(math.expm1(mean), lo, hi, n, gains, verdict)


def agreement(estimate: Estimate, claim_gain: float | None, claim_ci: Sequence[float] | None) -> tuple[bool, str] | None:
    """Whether the A/B agrees with the study's claim: the claimed gain lies inside the A/B interval, or the A/B's
    gain inside the claim's interval. ``None`` when there is no claim or no A/B interval.

    Example:
        >>> agreement(Estimate(0.02, 0.01, 0.03, 5, (), BETTER), 0.025, (0.0, 0.05))[0]
        True
        >>> agreement(Estimate(0.0, -0.01, 0.01, 5, (), SAME), 0.05, (0.03, 0.07))
        (False, 'disagrees: the claim +5.00 % [+3.00, +7.00] and the A/B +0.00 % [-1.00, +1.00] do not contain each other')
    """
    if claim_gain is None or estimate.gain is None or estimate.lo is None:
        return None
    ab = f"the A/B {pct(estimate.gain, (estimate.lo, estimate.hi))}"
    claim = f"the claim {pct(claim_gain, claim_ci)}"
    if estimate.lo <= claim_gain <= estimate.hi:
        return True, f"agrees: {claim} lies inside {ab}"
    if claim_ci is not None and claim_ci[0] <= estimate.gain <= claim_ci[1]:
        return True, f"agrees: {ab} lies inside {claim}"
    return False, f"disagrees: {claim} and {ab} do not contain each other"


def pct(gain: float | None, ci: Sequence[float | None] | None = None) -> str:
    """``+2.20 % [+1.87, +2.53]`` (the interval only when there is one).

    Example:
        >>> pct(0.022, (0.0187, 0.0253))
        '+2.20 % [+1.87, +2.53]'
    """
    if gain is None:
        return "-"
    text = f"{100 * gain:+.2f} %"
    if ci is not None and ci[0] is not None and ci[1] is not None:
        text += f" [{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]"
    return text
