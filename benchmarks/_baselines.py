"""The strategies flagopt is compared with: a manual one-factor protocol, random search and plain Optuna TPE.

Each runs in-process on :meth:`Landscape.sample_run` with the same drift (by launch index) and noise as the
simulated job, and each ends like its user would: the best observed configuration, with the gain it *claims*
(observed throughput over the observed baseline). None of them re-runs anything, so the claim is the best of many
noisy draws.

Example:
    >>> from flagopt.workloads.sim import load_landscape
    >>> choice = manual_protocol(load_landscape("win10"), seed=0)
    >>> choice.runs > 10
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from flagopt.workloads.sim import Landscape, SimulatedFailure

#: The steady-state window of the benchmark space (metric.window), steps 9..14 of 15.
WINDOW = (9, 14)
STEPS = 15


@dataclass(frozen=True)
class Choice:
    """What a strategy recommends: settings on top of the deployed baseline, the gain it claims, runs spent."""

    settings: Mapping[str, Any]
    claimed_gain: float
    runs: int
    detail: dict[str, Any] = field(default_factory=dict)


class Bench:
    """One simulated machine for one strategy: each ``measure`` is a launch (drift moves with the count)."""

    def __init__(self, land: Landscape, seed: int, stream: int) -> None:
        self.land = land
        self.rng = np.random.default_rng([seed, stream])
        self.runs = 0

    def measure(self, settings: Mapping[str, Any]) -> float | None:
        """Steady-state tokens/s of one run of ``settings`` (flat, on top of the baseline); ``None`` when it fails."""
        index = self.runs
        self.runs += 1
        try:
            values = self.land.sample_run(settings, index, self.rng, STEPS)
        except SimulatedFailure:
            return None
        return float(np.mean(values[WINDOW[0]:WINDOW[1] + 1]))


def manual_protocol(land: Landscape, seed: int) -> Choice:
    """Two baseline runs, one-factor waves over every param's grid (single runs), then the per-param best combined.

    The pick is the best observed configuration, the claim its throughput over the baseline pair's mean.
    """
    bench = Bench(land, seed, 1)
    pair = [bench.measure({}) for _ in range(2)]
    base = float(np.mean([v for v in pair if v is not None]))
    deployed = land.resolve({})
    observed: list[tuple[float, dict[str, Any]]] = [(base, {})]
    best_value: dict[str, Any] = {}
    for name, param in land.params.items():
        top = (base, None)
        for value in param.grid():
            if value == deployed[name]:
                continue
            measured = bench.measure({name: value})
            if measured is None:
                continue
            observed.append((measured, {name: value}))
            if measured > top[0]:
                top = (measured, value)
        if top[1] is not None:
            best_value[name] = top[1]
    if len(best_value) > 1:
        measured = bench.measure(best_value)
        if measured is not None:
            observed.append((measured, dict(best_value)))
    value, settings = max(observed, key=lambda item: item[0])
    return Choice(settings, value / base - 1.0, bench.runs)


def distributions(land: Landscape) -> dict[str, optuna.distributions.BaseDistribution]:
    """The search space as Optuna distributions (the same domains the flagopt space declares)."""
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for name, entry in land.space_params().items():
        if entry["type"] == "bool":
            out[name] = optuna.distributions.CategoricalDistribution([True, False])
        elif entry["type"] == "categorical":
            out[name] = optuna.distributions.CategoricalDistribution(list(entry["choices"]))
        elif entry["type"] == "int":
            out[name] = optuna.distributions.IntDistribution(int(entry["low"]), int(entry["high"]), log=entry["log"])
        else:
            out[name] = optuna.distributions.FloatDistribution(float(entry["low"]), float(entry["high"]),
                                                               log=entry["log"])
    return out


def optuna_search(land: Landscape, seed: int, budget: int, sampler: str) -> Choice:
    """One baseline run, then ``budget - 1`` trials of ``sampler`` (``random`` or ``tpe``) on raw tokens/s.

    A failed run (OOM) is a failed trial, as a plain Optuna objective that raises would record it.
    """
    bench = Bench(land, seed, 2 if sampler == "random" else 3)
    base = bench.measure({})
    assert base is not None  # the deployed configuration never fails in the landscapes
    chosen: optuna.samplers.BaseSampler = (optuna.samplers.RandomSampler(seed=seed) if sampler == "random"
                                           else optuna.samplers.TPESampler(seed=seed))
    study = optuna.create_study(direction="maximize", sampler=chosen)
    dists = distributions(land)
    best: tuple[float, dict[str, Any]] = (base, {})
    for _ in range(max(budget - 1, 0)):
        trial = study.ask(dists)
        measured = bench.measure(trial.params)
        if measured is None or not math.isfinite(measured):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        study.tell(trial, measured)
        if measured > best[0]:
            best = (measured, dict(trial.params))
    return Choice(best[1], best[0] / base - 1.0, bench.runs)
