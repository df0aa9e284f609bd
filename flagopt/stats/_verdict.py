"""One configuration ("arm") against the drift-corrected baseline: its gain, interval and verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from flagopt.stats._drift import mean_gain_terms
from flagopt.stats._noise import DEFAULT_NOISE_FLOOR, Run, noise_estimate

Verdict = Literal["better", "worse", "same", "unknown"]


@dataclass(frozen=True)
class ArmEstimate:
    """Mean relative gain of an arm over the baseline, with a two-sided Student-t interval.

    Attributes:
        gain: mean drift-corrected gain (0.031 = +3.1 %).
        lo, hi: the interval at the confidence it was computed with.
        n: runs of the arm.
        sigma: relative run-to-run noise used.
        se: standard error of ``gain`` (run noise of arm and baselines, plus extrapolation).
        df: degrees of freedom of the noise estimate.
        baseline_share: the part of ``se**2`` that comes from the baseline runs it is compared with; above one half,
            another run of the arm helps less than a baseline control next to it (see :func:`needs_control`).
    """

    gain: float
    lo: float
    hi: float
    n: int
    sigma: float
    se: float = 0.0
    df: float = math.inf
    baseline_share: float = 0.0

    def bounds(self, confidence: float) -> tuple[float, float]:
        """The two-sided interval at another confidence (e.g. a Bonferroni-corrected one).

        Example:
            >>> est = ArmEstimate(gain=0.05, lo=0.03, hi=0.07, n=4, sigma=0.01, se=0.01, df=math.inf)
            >>> [round(b, 4) for b in est.bounds(0.95)]
            [0.0304, 0.0696]
        """
        if self.n == 0 or not math.isfinite(self.gain):
            return (-math.inf, math.inf)
        q = float(sps.t.ppf(0.5 + confidence / 2.0, self.df))
        return (self.gain - q * self.se, self.gain + q * self.se)


def estimate_arm(
    arm_runs: Sequence[Run],
    baselines: Sequence[Run],
    *,
    confidence: float = 0.95,
    noise_floor: float | None = DEFAULT_NOISE_FLOOR,
) -> ArmEstimate:
    """Gain of one arm over the drift-corrected baseline, with an interval that includes the baseline's error.

    The noise sigma pools two estimates: the drift-free successive differences of the baselines (``m - 2``
    degrees of freedom) and the spread of the arm's own per-run gains (``n - 1``). The mean gain's variance is
    ``sigma^2`` times the sum of squared coefficients of every run it depends on (arm runs and the baseline runs
    interpolated for them), plus the extrapolation variance of runs after the last control. The interval uses
    Student's t with the pooled degrees of freedom.

    Args:
        arm_runs: the arm's runs (first run and repeats).
        baselines: every baseline-deployed run of the study.
        confidence: two-sided confidence of ``lo``/``hi``.
        noise_floor: the smallest relative sigma to believe (``None``: no floor beyond the step noise).

    Example:
        >>> base = [Run(t=t, value=v) for t, v in [(0, 100.0), (3, 100.4), (6, 99.7), (9, 100.2)]]
        >>> arm = [Run(t=t, value=v) for t, v in [(1, 106.1), (4, 105.6), (7, 106.3)]]
        >>> est = estimate_arm(arm, base)
        >>> round(est.gain, 3), est.lo > 0.04, est.n
        (0.059, True, 3)
    """
    n = len(arm_runs)
    if n == 0:
        return ArmEstimate(gain=math.nan, lo=-math.inf, hi=math.inf, n=0, sigma=math.nan, se=math.inf, df=0.0)
    g, arm_coef2, base_coef2, ext = mean_gain_terms(arm_runs, baselines)
    coef2 = arm_coef2 + base_coef2
    base_noise = noise_estimate(baselines)
    ss, df = base_noise.sigma**2 * base_noise.df, base_noise.df
    if n >= 2:
        # per-run gains also carry their baselines' noise, so their spread over-states sigma a little: the
        # conservative side, kept on purpose (it also absorbs an arm that is noisier than the baseline).
        ss += float(np.var(g, ddof=1)) * (n - 1)
        df += n - 1
    sigma = math.sqrt(ss / df)
    if noise_floor is not None:
        sigma = max(sigma, noise_floor)
    ext_sd = float(np.mean(np.sqrt(ext)))
    # extrapolated runs share the drift error: their sds add up, not their variances (conservative).
    var = sigma**2 * coef2 + ext_sd**2
    se = math.sqrt(var)
    share = (sigma**2 * base_coef2 + ext_sd**2) / var if var > 0 else 0.0
    gain = float(np.mean(g))
    q = float(sps.t.ppf(0.5 + confidence / 2.0, df))
    return ArmEstimate(
        gain=gain, lo=gain - q * se, hi=gain + q * se, n=n, sigma=sigma, se=se, df=df, baseline_share=share
    )


def needs_control(est: ArmEstimate, *, max_share: float = 0.5) -> bool:
    """Whether the next run for this arm should be a baseline control rather than the arm itself.

    Repeats of an arm compared with the same two controls stop improving its estimate: the controls' own noise
    does not average out. When more than ``max_share`` of the variance is the baselines', run a control next to
    the arm first (the confirmation becomes the paired A-B-A-B design).

    Example:
        >>> needs_control(ArmEstimate(gain=0.03, lo=0.0, hi=0.06, n=4, sigma=0.01, se=0.01, baseline_share=0.7))
        True
    """
    return est.n > 0 and est.baseline_share > max_share


def verdict(est: ArmEstimate, *, min_effect: float = 0.01, min_runs: int = 2) -> Verdict:
    """Three-way (four with "worse") verdict: a change counts only if significant *and* above ``min_effect``.

    * ``better``: the interval excludes 0 from above and the gain is at least ``min_effect``;
    * ``worse``: the interval excludes 0 from below and the loss is at least ``min_effect``;
    * ``same``: the whole interval lies within ``(-min_effect, +min_effect)`` (an equivalence test);
    * ``unknown``: fewer than ``min_runs`` runs, or none of the above yet.

    Example:
        >>> verdict(ArmEstimate(gain=0.06, lo=0.045, hi=0.075, n=3, sigma=0.01), min_effect=0.01)
        'better'
        >>> verdict(ArmEstimate(gain=0.002, lo=-0.006, hi=0.009, n=4, sigma=0.005), min_effect=0.01)
        'same'
    """
    if est.n < min_runs or not math.isfinite(est.gain):
        return "unknown"
    if est.lo > 0 and est.gain >= min_effect:
        return "better"
    if est.hi < 0 and est.gain <= -min_effect:
        return "worse"
    if -min_effect < est.lo and est.hi < min_effect:
        return "same"
    return "unknown"


def runs_needed(sigma: float, effect: float, *, confidence: float = 0.95, power: float = 0.8) -> int:
    """About how many runs per configuration tell a gain of ``effect`` from run-to-run noise ``sigma``.

    The usual two-sample size: each gain is one configuration's mean against the deployed job's, both measured with
    relative noise ``sigma``, so ``n = 2 ((z_(1-a/2) + z_power) sigma / effect)^2`` runs of each, rounded up. It is
    what a verdict says it would take when the noise is too large for the runs a study had (the wording only; the
    decisions have their own rules).

    Example:
        >>> runs_needed(0.01, 0.02), runs_needed(0.40, 0.02)
        (4, 6280)
    """
    if not (math.isfinite(sigma) and sigma > 0 and effect > 0):
        return 1
    z = float(sps.norm.ppf(0.5 + confidence / 2.0) + sps.norm.ppf(power))
    return max(1, math.ceil(2.0 * (z * sigma / effect) ** 2))


def runs_to_clear(estimate: ArmEstimate, bar: float, confidence: float = 0.95) -> float:
    """How many more runs at the mean it measured would put ``estimate``'s lower bound above ``bar``: its own share
    of the variance shrinks with the runs, the baselines' share (``baseline_share``) does not (``math.inf``: no number
    would; 0.0: it is above already, or it has no spread to narrow).

    Example (run noise 1 %, three runs, no baseline share):
        >>> est = ArmEstimate(gain=0.055, lo=0.0, hi=0.0, n=3, sigma=0.01, se=0.01 / math.sqrt(3))
        >>> round(runs_to_clear(est, 0.05), 1), runs_to_clear(est, 0.06), runs_to_clear(est, 0.03)
        (12.4, inf, 0.0)
    """
    if estimate.n == 0 or not (math.isfinite(estimate.se) and estimate.se > 0):
        return 0.0
    gap = estimate.gain - bar
    if gap <= 0:
        return math.inf
    ratio = (gap / (estimate.gain - estimate.bounds(confidence)[0])) ** 2  # the share of today's variance it may keep
    if ratio >= 1.0:
        return 0.0
    share = estimate.baseline_share
    if ratio <= share:
        return math.inf
    return (1.0 - share) * estimate.n / (ratio - share) - estimate.n


def inconclusive(sigma: float | None, effect: float, most_runs: int, *, confidence: float = 0.95) -> str | None:
    """``inconclusive: run-to-run noise X %, about N runs per configuration would be needed ...`` when the noise is
    too large for a study that gave no configuration more than ``most_runs`` runs to tell ``effect``; else ``None``.

    Example:
        >>> inconclusive(0.40, 0.02, 3)
        'inconclusive: run-to-run noise 40.0 %, about 6280 runs per configuration would be needed to tell a +2 % gain from noise (this study ran at most 3)'
        >>> inconclusive(0.005, 0.02, 3) is None
        True
    """
    if sigma is None or not math.isfinite(sigma):
        return None
    need = runs_needed(sigma, effect, confidence=confidence)
    if need <= most_runs:
        return None
    return (f"inconclusive: run-to-run noise {100 * sigma:.1f} %, about {need} runs per configuration would be needed "
            f"to tell a {100 * effect:+.0f} % gain from noise (this study ran at most {most_runs})")
