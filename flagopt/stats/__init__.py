"""Noise model, drift correction, verdicts, repeat allocation and stop rules (pure functions over plain data).

A study re-runs the deployed baseline every few trials; each trial is scored as a relative gain over the
baseline level interpolated at its time; promising configurations are re-run (raced) until a verdict; the study
stops on a confirmed winner, a negative finding, or its budget. ``docs/statistics.md`` justifies each choice.

Example:
    >>> from flagopt.stats import Run, estimate_arm, verdict
    >>> base = [Run(t=t, value=v) for t, v in [(0, 100.0), (3, 100.4), (6, 99.7), (9, 100.2)]]
    >>> arm = [Run(t=t, value=v) for t, v in [(1, 106.1), (4, 105.6), (7, 106.3)]]
    >>> verdict(estimate_arm(arm, base), min_effect=0.01)
    'better'
"""

from __future__ import annotations

from flagopt.stats._bandit import next_to_sample
from flagopt.stats._drift import (
    Estimate,
    baseline_at,
    drift_interval,
    drift_rate,
    gains,
)
from flagopt.stats._effects import EffectsFit, Observation, Prediction, fit_effects
from flagopt.stats._joint import STRAGGLER_SIGMAS, estimate_arms, slow_runs
from flagopt.stats._noise import (
    DEFAULT_NOISE_FLOOR,
    NoiseEstimate,
    Run,
    noise_estimate,
    run_noise,
)
from flagopt.stats._selection import shrunk_for_selection
from flagopt.stats._stop import StopDecision, StopReason, evaluate_stop, win_confidence
from flagopt.stats._verdict import (ArmEstimate, Verdict, estimate_arm, inconclusive, needs_control, runs_needed,
                                    runs_to_clear, verdict)

__all__ = [
    "DEFAULT_NOISE_FLOOR",
    "EffectsFit",
    "Observation",
    "Prediction",
    "fit_effects",
    "ArmEstimate",
    "Estimate",
    "NoiseEstimate",
    "Run",
    "StopDecision",
    "StopReason",
    "Verdict",
    "baseline_at",
    "drift_interval",
    "drift_rate",
    "estimate_arm",
    "estimate_arms",
    "evaluate_stop",
    "gains",
    "inconclusive",
    "needs_control",
    "next_to_sample",
    "noise_estimate",
    "run_noise",
    "runs_needed",
    "runs_to_clear",
    "shrunk_for_selection",
    "STRAGGLER_SIGMAS",
    "slow_runs",
    "verdict",
    "win_confidence",
]
