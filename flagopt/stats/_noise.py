"""Run-to-run noise: how much one steady-state measurement of the same configuration varies between runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The lower end of run-to-run noise on pinned GPU hardware (0.3 %): no estimate may claim less, because a few
#: baselines that happen to agree would otherwise make every interval too narrow.
DEFAULT_NOISE_FLOOR = 0.003


@dataclass(frozen=True)
class Run:
    """One steady-state measurement of one configuration.

    Attributes:
        t: when it ran, on the study's clock (the launch sequence number by default; any monotone clock works as
            long as baselines and trials share it).
        value: the steady-state metric (tokens/s/device, higher is better).
        step_std: spread of the per-step values inside the steady-state window.
        n_steps: how many steps the window holds.
        block: the hardware it ran on (a slot's nodelist; ``""`` when the study has one): every gain is measured
            against the baselines of its own block, so a slower node group never looks like a worse configuration.

    Example:
        >>> Run(t=3, value=50_574.6).value
        50574.6
    """

    t: float
    value: float
    step_std: float = 0.0
    n_steps: int = 6
    block: str = ""


def by_block(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs grouped by their block, in order of first appearance."""
    out: dict[str, list[Run]] = {}
    for run in runs:
        out.setdefault(run.block, []).append(run)
    return out


def runs_of_block(runs: Sequence[Run], block: str) -> list[Run]:
    """The runs of ``block``; every run when the block has none yet (a slot whose first control is still to come)."""
    mine = [r for r in runs if r.block == block]
    return mine or list(runs)


@dataclass(frozen=True)
class NoiseEstimate:
    """A relative run-to-run sigma and the degrees of freedom behind it (for Student-t quantiles)."""

    sigma: float
    df: float


def _step_floor(runs: Sequence[Run]) -> float:
    """The noise a run cannot be below: the standard error of its own steady-state mean."""
    ratios = [r.step_std / r.value / math.sqrt(max(r.n_steps, 1)) for r in runs if r.value > 0 and r.step_std > 0]
    return float(np.median(ratios)) if ratios else 0.0


def noise_estimate(baselines: Sequence[Run]) -> NoiseEstimate:
    """Relative run-to-run sigma from repeated baseline runs, with its degrees of freedom.

    Successive differences of time-ordered baselines cancel any slow drift; subtracting the least-squares slope
    of those differences also cancels a linear trend, so ``var(d_i - slope * dt_i) = 2 sigma^2``. With fewer than
    two baselines the step-level standard error is the only information, with one degree of freedom. Runs of
    several blocks (slots) are differenced within their block, each relative to its own level, and pooled: an
    offset or a drift between node groups is not noise.
    """
    blocks = [b for b in by_block([r for r in baselines if r.value > 0]).values() if len(b) >= 2]
    if len(blocks) > 1:
        return _pooled_noise(blocks, _step_floor(baselines))
    if blocks and len(blocks[0]) < len([r for r in baselines if r.value > 0]):
        return _block_noise(blocks[0])  # one block with repeats, others with a single run: only it measures noise
    if not blocks and len(by_block(baselines)) > 1:
        return NoiseEstimate(sigma=_step_floor(baselines), df=1.0)  # one run per block: nothing measures noise yet
    return _block_noise(baselines)


def _pooled_noise(blocks: Sequence[Sequence[Run]], floor: float) -> NoiseEstimate:
    """Successive differences within each block (each relative to its own level), one trend slope for all.

    A slope per block would spend a degree of freedom in every block, and a slot has few baselines: with four
    slots of three baselines each that left 4 degrees of freedom instead of 7.
    """
    diffs: list[np.ndarray] = []
    dts: list[np.ndarray] = []
    for block in blocks:
        runs = sorted(block, key=lambda r: r.t)
        level = float(np.median([r.value for r in runs]))
        diffs.append(np.diff(np.array([r.value / level for r in runs])))
        dts.append(np.diff(np.array([r.t for r in runs], dtype=float)))
    d, dt = np.concatenate(diffs), np.concatenate(dts)
    total = float(np.sum(dt * dt))
    slope = float(np.sum(d * dt) / total) if total > 0 else 0.0
    df = len(d) - 1
    if df < 1:
        return NoiseEstimate(sigma=max(abs(float(d[0])) / math.sqrt(2.0), floor), df=1.0)
    sigma = math.sqrt(float(np.sum((d - slope * dt) ** 2)) / df / 2.0)
    return NoiseEstimate(sigma=max(sigma, floor), df=float(df))


def _block_noise(baselines: Sequence[Run]) -> NoiseEstimate:
    runs = sorted((r for r in baselines if r.value > 0), key=lambda r: r.t)
    floor = _step_floor(runs)
    if len(runs) < 2:
        return NoiseEstimate(sigma=floor, df=1.0)
    level = float(np.median([r.value for r in runs]))
    rel = np.array([r.value / level for r in runs])
    times = np.array([r.t for r in runs], dtype=float)
    diffs, dts = np.diff(rel), np.diff(times)
    if len(runs) == 2:
        return NoiseEstimate(sigma=max(abs(float(diffs[0])) / math.sqrt(2.0), floor), df=1.0)
    total_dt = float(dts.sum())
    slope = float(diffs.sum() / total_dt) if total_dt > 0 else 0.0
    resid = diffs - slope * dts
    df = len(runs) - 2
    sigma = math.sqrt(float(np.sum(resid**2)) / df / 2.0)
    return NoiseEstimate(sigma=max(sigma, floor), df=float(df))


def run_noise(baselines: Sequence[Run]) -> float:
    """Relative run-to-run sigma of baseline runs, robust to drift (see :func:`noise_estimate`).

    Example:
        >>> runs = [Run(t=i, value=100.0 + 0.5 * i + (0.3 if i % 2 else -0.3)) for i in range(10)]
        >>> round(run_noise(runs), 3)  # a drift of 4.5 % leaves the ~0.4 % alternating noise
        0.004
    """
    return noise_estimate(baselines).sigma
