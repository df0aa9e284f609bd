"""Drift correction: the baseline level at any moment of the study, from the baseline runs around it.

The baseline is re-run every few trials. A trial at time ``t`` is compared with the straight line through the
baseline runs just before and just after it (linear interpolation between neighbours). Between two controls a
drift that is linear is removed exactly, and a smooth drift nearly so; a trial after the last control is compared
with that control (flat extrapolation) and its uncertainty grows with the distance times the drift speed, until the
next control arrives and the trial is re-scored by interpolation.

A study on several slots (node groups) measures each run against the baselines of its own slot (``Run.block``):
each slot has its own level and its own drift, and a gain is a comparison within one piece of hardware.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from flagopt.stats._noise import Run, by_block, noise_estimate, runs_of_block


@dataclass(frozen=True)
class Estimate:
    """A level and its standard error, in the units of the runs' values."""

    value: float
    se: float


@dataclass(frozen=True)
class _Groups:
    """Baselines grouped by time: several runs at one ``t`` are averaged."""

    times: np.ndarray
    means: np.ndarray
    counts: np.ndarray


def _groups(baselines: Sequence[Run]) -> _Groups:
    runs = [r for r in baselines if r.value > 0]
    if not runs:
        raise ValueError("drift correction needs at least one baseline run")
    times = np.array(sorted({float(r.t) for r in runs}))
    sums = np.zeros(len(times))
    counts = np.zeros(len(times))
    for r in runs:
        i = int(np.searchsorted(times, float(r.t)))
        sums[i] += r.value
        counts[i] += 1
    return _Groups(times=times, means=sums / counts, counts=counts)


def _weights(groups: _Groups, t: float) -> tuple[dict[int, float], float]:
    """Interpolation weights over baseline groups at ``t``, and the extrapolation distance (0 inside)."""
    times = groups.times
    if t <= times[0]:
        return {0: 1.0}, float(times[0] - t)
    if t >= times[-1]:
        return {len(times) - 1: 1.0}, float(t - times[-1])
    b = int(np.searchsorted(times, t))
    a = b - 1
    w = (t - times[a]) / (times[b] - times[a])
    return {a: 1.0 - w, b: w}, 0.0


def drift_rate(baselines: Sequence[Run], *, window: int | None = None) -> Estimate:
    """Relative drift per unit of ``t``: the Theil-Sen slope of the (last ``window``) baselines, robust to outliers.

    The standard error comes from the least-squares fit of the same points (zero with fewer than three). Give it
    the baselines of one block: a slope across node groups would read their offset as drift.
    """
    runs = sorted((r for r in baselines if r.value > 0), key=lambda r: r.t)
    if window:
        runs = runs[-window:]
    if len(runs) < 2 or runs[0].t == runs[-1].t:
        return Estimate(0.0, 0.0)
    level = float(np.median([r.value for r in runs]))
    times = np.array([r.t for r in runs], dtype=float)
    rel = np.array([r.value / level - 1.0 for r in runs])
    slope = float(sps.theilslopes(rel, times).slope)
    se = float(sps.linregress(times, rel).stderr) if len(runs) > 2 and np.ptp(times) > 0 else 0.0
    return Estimate(slope, 0.0 if math.isnan(se) else se)


def baseline_at(baselines: Sequence[Run], t: float, *, sigma: float | None = None, block: str = "") -> Estimate:
    """Drift-corrected baseline level at ``t`` (on ``block``) and its standard error.

    Args:
        baselines: the baseline-deployed runs of the study.
        t: the moment to estimate the level at.
        sigma: relative run-to-run noise; estimated from ``baselines`` when omitted.
        block: the slot whose level is wanted (its baselines only; all of them while it has none).

    Example:
        >>> runs = [Run(t=0, value=100.0), Run(t=4, value=104.0)]
        >>> baseline_at(runs, 1.0, sigma=0.0).value
        101.0
    """
    if sigma is None:
        sigma = noise_estimate(baselines).sigma
    baselines = runs_of_block(baselines, block)
    groups = _groups(baselines)
    weights, distance = _weights(groups, t)
    level = sum(w * groups.means[i] for i, w in weights.items())
    rel_var = sigma**2 * sum(w**2 / groups.counts[i] for i, w in weights.items())
    rel_var += extrapolation_var(baselines, distance)
    return Estimate(float(level), float(level * math.sqrt(rel_var)))


def extrapolation_var(baselines: Sequence[Run], distance: float) -> float:
    """Relative variance added by comparing with a baseline ``distance`` away: (bias^2 + slope uncertainty^2) d^2.

    ``baselines`` are one block's.
    """
    if distance <= 0:
        return 0.0
    rate = drift_rate(baselines)
    return (rate.value**2 + rate.se**2) * distance**2


def gains(arm_runs: Sequence[Run], baselines: Sequence[Run]) -> list[float]:
    """Per-run relative gain of ``arm_runs`` over the drift-corrected baseline at each run's time.

    Each run is compared with the baselines of its own block.

    Example:
        >>> base = [Run(t=0, value=100.0), Run(t=2, value=102.0)]
        >>> [round(g, 4) for g in gains([Run(t=1, value=106.05)], base)]
        [0.05]
        >>> slow = [Run(t=0, value=97.0, block="b"), Run(t=2, value=98.94, block="b")]
        >>> [round(g, 4) for g in gains([Run(t=1, value=102.8685, block="b")], base + slow)]
        [0.05]
    """
    out = []
    blocks = _block_groups(baselines)
    for run in arm_runs:
        groups = blocks.get(run.block) or blocks[None]
        weights, _ = _weights(groups, run.t)
        level = sum(w * groups.means[i] for i, w in weights.items())
        out.append(float(run.value / level - 1.0))
    return out


def _block_groups(baselines: Sequence[Run]) -> dict[str | None, _Groups]:
    """Each block's baseline groups, and under ``None`` all of them (for a block without baselines yet)."""
    out: dict[str | None, _Groups] = {b: _groups(runs) for b, runs in by_block(baselines).items()
                                      if any(r.value > 0 for r in runs)}
    out[None] = _groups(baselines)
    return out


def drift_interval(
    baselines: Sequence[Run],
    *,
    k_min: int = 2,
    k_max: int = 8,
    budget_sigma: float = 0.5,
    t_per_trial: float = 1.0,
    window: int = 6,
    sigma_floor: float = 0.0,
) -> int:
    """How many trials to run between two baseline controls, adaptive to the measured drift.

    Until the next control arrives a trial is scored against the last one, so its gain is biased by the drift
    accumulated since: ``speed * k``. The interval keeps that bias below ``budget_sigma`` run-noise sigmas, using
    the drift speed of the last ``window`` baselines. With fewer than three baselines the drift is unknown and the
    interval is ``k_min``.

    Example:
        >>> flat = [Run(t=2 * i, value=100.0 + (0.4 if i % 2 else -0.4)) for i in range(8)]
        >>> drift_interval(flat)
        8
    """
    runs = [r for r in baselines if r.value > 0]
    if len(runs) < 3:
        return k_min
    # A sigma from three or four controls (two degrees of freedom) is often a fraction of the true one, and a
    # control then came every k_min runs: never below the noise floor the planner uses.
    sigma = max(noise_estimate(runs).sigma, sigma_floor)
    # The slope of a few noisy controls is mostly their noise: only the part beyond its standard error is drift
    # (else a flat job got a control every fifth run, 17 % of a study's runs).
    rate = drift_rate(runs, window=window)
    speed = max(abs(rate.value) - rate.se, 0.0) * t_per_trial
    if speed <= 0:
        return k_max
    return int(min(k_max, max(k_min, math.floor(budget_sigma * sigma / speed))))


def mean_gain_terms(arm_runs: Sequence[Run], baselines: Sequence[Run]) -> tuple[np.ndarray, float, float, np.ndarray]:
    """Pieces of the mean-gain variance: per-run gains, the baseline-noise factor, extrapolation variances.

    The mean gain is a linear combination of all runs' relative noise: each arm run enters with weight
    ``(1 + g_j) / n`` and each baseline group ``i`` with ``-(sum_j (1 + g_j) w_ji) / n`` over its ``counts_i``
    runs (groups of the run's own block). Returns ``(g, arm_coef2, base_coef2, ext)``: ``sigma^2 * (arm_coef2 +
    base_coef2)`` is the variance of the mean gain due to run noise (arm part, baseline part), ``ext`` the per-run
    extrapolation variances.
    """
    blocks = _block_groups(baselines)
    n = len(arm_runs)
    g = np.array(gains(arm_runs, baselines))
    arm_part = float(np.sum((1.0 + g) ** 2)) / n**2
    base_coef = {b: np.zeros(len(groups.times)) for b, groups in blocks.items()}
    ext = np.zeros(n)
    for j, run in enumerate(arm_runs):
        block = run.block if run.block in blocks else None
        weights, distance = _weights(blocks[block], run.t)
        for i, w in weights.items():
            base_coef[block][i] += (1.0 + g[j]) * w / n
        ext[j] = extrapolation_var(runs_of_block(baselines, run.block), distance)
    base_part = float(sum(np.sum(coef**2 / blocks[b].counts) for b, coef in base_coef.items()))
    return g, arm_part, base_part, ext
