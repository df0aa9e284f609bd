"""The gain of an arm picked among several by their own runs, corrected for the pick (the winner's curse).

Among arms whose runs cannot tell them apart, the one picked as best is the one whose runs read high: its mean is
high by selection even where every run it rests on is fresh. A random-effects fit of the candidates' gains (the
DerSimonian–Laird estimate of how much they truly differ, ``tau``) says how much of the pick's lead is real: where
they differ by no more than their noise explains, its gain is pulled to their pooled mean; where they differ by much
more, it keeps its own (empirical Bayes; docs/statistics.md §11).

Example:
    >>> from flagopt.stats import ArmEstimate
    >>> close = [ArmEstimate(gain=g, lo=g - 0.01, hi=g + 0.01, n=3, sigma=0.01, se=0.005)
    ...          for g in (0.040, 0.043, 0.045, 0.048)]
    >>> round(shrunk_for_selection(close, 3).gain, 4)  # four arms within their noise: the pooled mean
    0.044
    >>> apart = [ArmEstimate(gain=g, lo=g - 0.01, hi=g + 0.01, n=3, sigma=0.01, se=0.005) for g in (0.0, 0.06)]
    >>> round(shrunk_for_selection(apart, 1).gain, 4)  # far apart: the pick keeps nearly all of its lead
    0.0596
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from flagopt.stats._verdict import ArmEstimate


def between_arms_variance(gains: np.ndarray, variances: np.ndarray) -> float:
    """DerSimonian–Laird's moment estimate of the variance of the arms' true gains (``tau**2``, never below 0).

    Example:
        >>> between_arms_variance(np.array([0.01, 0.01]), np.array([1e-4, 1e-4]))
        0.0
    """
    weights = 1.0 / variances
    pooled = float(np.sum(weights * gains) / np.sum(weights))
    q = float(np.sum(weights * (gains - pooled) ** 2))
    scale = float(np.sum(weights) - np.sum(weights**2) / np.sum(weights))
    return max(0.0, (q - (len(gains) - 1)) / scale) if scale > 0 else 0.0


def shrunk_for_selection(candidates: Sequence[ArmEstimate], pick: int) -> ArmEstimate:
    """``candidates[pick]`` with its gain pulled toward the candidates' random-effects mean, by the share of its
    variance their spread does not explain; its interval moves with it, its width kept.

    The width is kept because the candidates were measured against the same controls: their errors are correlated,
    and the pooled mean is not known better than any one of them. The gain is only ever lowered (the pick was made
    because it read high; an arm picked on other grounds that reads below the others keeps its own reading), and a
    single candidate, or one without a finite standard error, is returned as it is.
    """
    chosen = candidates[pick]
    if len(candidates) < 2 or not all(math.isfinite(c.gain) and math.isfinite(c.se) and c.se > 0 for c in candidates):
        return chosen
    gains = np.array([c.gain for c in candidates])
    variances = np.array([c.se**2 for c in candidates])
    tau2 = between_arms_variance(gains, variances)
    weights = 1.0 / (variances + tau2)
    mean = float(np.sum(weights * gains) / np.sum(weights))
    kept = tau2 / (tau2 + chosen.se**2)  # the share of the pick's departure from the mean that is real
    gain = mean + kept * (chosen.gain - mean)
    if gain >= chosen.gain:
        return chosen
    shift = gain - chosen.gain
    return replace(chosen, gain=gain, lo=chosen.lo + shift, hi=chosen.hi + shift)
