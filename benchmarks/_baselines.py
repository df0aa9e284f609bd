"""The strategies flagopt is compared with: a manual one-factor protocol, random search, plain Optuna TPE, TPE with
flagopt-like repeats and controls, and a model-based optimizer from the package index (scikit-optimize).

Each runs in-process on :meth:`Landscape.sample_run` with the same drift (by launch index), noise and
infrastructure failures (a ``flaky:`` landscape) as the simulated job, on its own random stream, and each ends
like its user would: a configuration with the gain it *claims*. The plain strategies re-run nothing, so their claim
is the best of many noisy draws; TPE with repeats claims a drift-corrected mean over repeats, with an interval.

Every launch is logged (:class:`RunLog`: settings, control or not, ok, simulated seconds), so run-seconds, the
share of controls and repeated failures are measured the same way for every strategy.

Example:
    >>> from flagopt.workloads.sim import load_landscape
    >>> choice = manual_protocol(load_landscape("win10"), seed=0)
    >>> choice.runs > 10, choice.runs == len(choice.detail["log"])
    (True, True)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from scipy import stats as sstats

from flagopt.workloads.sim import DEFAULT_HANG_S, STARTUP_S, Landscape, SimulatedFailure

#: The steady-state window of the benchmark space (metric.window), steps 9..14 of 15.
WINDOW = (9, 14)
STEPS = 15
#: Random streams: one per strategy, so each sees its own noise on the same drift.
STREAMS = {"manual": 1, "random": 2, "tpe": 3, "tpe-repeats": 4, "skopt": 5, "manual-x3": 6}


@dataclass(frozen=True)
class RunLog:
    """One launch of a strategy: what it set (flat, on top of the baseline), whether it was a control, how it ended."""

    settings: Mapping[str, Any]
    control: bool
    ok: bool
    seconds: float
    fault: str | None = None


@dataclass(frozen=True)
class Choice:
    """What a strategy recommends: settings on top of the deployed baseline, the gain it claims, runs spent.

    ``detail`` may carry ``ci`` (a 95 % interval of the claimed gain), ``log`` (a list of :class:`RunLog`),
    ``run_seconds`` and, for flagopt, ``verdict``, ``winner`` and ``kinds``.
    """

    settings: Mapping[str, Any]
    claimed_gain: float
    runs: int
    detail: dict[str, Any] = field(default_factory=dict)


class Bench:
    """One simulated machine for one strategy: each ``measure`` is a launch (drift moves with the count)."""

    def __init__(self, land: Landscape, seed: int, stream: int) -> None:
        self.land = land
        self.seed, self.stream = seed, stream
        self.rng = np.random.default_rng([seed, stream])
        self.runs = 0
        self.log: list[RunLog] = []

    def measure(self, settings: Mapping[str, Any], *, control: bool = False, retry_flaky: bool = False) -> float | None:
        """Steady-state tokens/s of one run of ``settings`` (flat, on top of the baseline); ``None`` when it fails.

        ``retry_flaky``: an infrastructure failure (NCCL, coordination, hang) is launched once more, as an engineer
        would; both launches count.
        """
        value, fault = self._launch(settings, control)
        if value is None and retry_flaky and fault not in (None, "oom", "unknown_flag"):
            value, fault = self._launch(settings, control)
        return value

    def _launch(self, settings: Mapping[str, Any], control: bool) -> tuple[float | None, str | None]:
        index = self.runs
        self.runs += 1
        fault = self.land.infra_fault(self.seed, index, self.stream)
        if fault in ("nccl_init", "coordination_timeout"):
            self.log.append(RunLog(dict(settings), control, False, STARTUP_S + self.land.compile_s, fault))
            return None, fault
        try:
            values = self.land.sample_run(settings, index, self.rng, STEPS)
        except SimulatedFailure as failure:
            self.log.append(RunLog(dict(settings), control, False, STARTUP_S + self.land.compile_s, failure.kind))
            return None, failure.kind
        per_step = self.land.total_weights / self.land.devices
        seconds = [per_step / v for v in values]
        if fault == "hang":
            printed = self.land.hang_after(self.seed, index, STEPS, self.stream)
            spent = STARTUP_S + sum(seconds[:printed]) + DEFAULT_HANG_S
            self.log.append(RunLog(dict(settings), control, False, spent, fault))
            return None, fault
        self.log.append(RunLog(dict(settings), control, True, STARTUP_S + sum(seconds), fault))
        return float(np.mean(values[WINDOW[0]:WINDOW[1] + 1])), fault

    def detail(self, **extra: Any) -> dict[str, Any]:
        """The run log and its total simulated seconds, plus ``extra``."""
        return {"log": list(self.log), "run_seconds": float(sum(r.seconds for r in self.log)), **extra}


def _baseline_level(bench: Bench, n: int) -> float:
    """Mean of ``n`` successful baseline runs (a failed one is launched again, at most ``2 n`` launches)."""
    values: list[float] = []
    for _ in range(2 * n):
        measured = bench.measure({}, control=True, retry_flaky=False)
        if measured is not None:
            values.append(measured)
        if len(values) == n:
            break
    if not values:
        raise RuntimeError(f"{bench.land.name}: the deployed baseline never ran ok")
    return float(np.mean(values))


def manual_protocol(land: Landscape, seed: int, *, repeats: int = 1) -> Choice:
    """Two baseline runs, each catalog profile once, one-factor waves over every param's grid (single runs), then the
    per-param best combined.

    The pick is the best observed configuration, the claim its throughput over the baseline pair's mean. An
    infrastructure failure is launched once more; a value that fails otherwise (OOM) is never tried again, and a
    flag the job's XLA does not know ends its wave (the engineer reads "Unknown flag" and drops it).

    ``repeats``: a careful engineer's variant (``manual-x3``): every run of the protocol, the baselines included, is
    made ``repeats`` times in a row and its mean is what is compared. It maps what the engineer's own protocol buys
    with more runs (docs/benchmark-decisions.md, "the engineer's frontier").
    """
    bench = Bench(land, seed, STREAMS["manual" if repeats == 1 else f"manual-x{repeats}"])

    def measure(settings: dict[str, Any]) -> float | None:
        values = [v for v in (bench.measure(settings, retry_flaky=True) for _ in range(repeats)) if v is not None]
        return float(np.mean(values)) if values else None

    base = float(np.mean([_baseline_level(bench, 2) for _ in range(repeats)]))
    deployed = land.resolve({})
    observed: list[tuple[float, dict[str, Any]]] = [(base, {})]
    best_value: dict[str, Any] = {}
    for profile in land.profiles.values():  # the catalog's recipes, each run once like any other candidate
        settings = {name: value for part in profile.values() for name, value in part.items()}
        measured = measure(settings)
        if measured is not None:
            observed.append((measured, settings))
    for name, param in land.params.items():
        if not param.tunable:
            continue  # a setting only a profile sets: the engineer's one-factor waves cover the space's params
        top = (base, None)
        for value in param.grid():
            if value == deployed[name]:
                continue
            measured = measure({name: value})
            if measured is None:
                if bench.log[-1].fault == "unknown_flag":
                    break
                continue
            observed.append((measured, {name: value}))
            if measured > top[0]:
                top = (measured, value)
        if top[1] is not None:
            best_value[name] = top[1]
    if len(best_value) > 1:
        measured = measure(best_value)
        if measured is not None:
            observed.append((measured, dict(best_value)))
    value, settings = max(observed, key=lambda item: item[0])
    return Choice(settings, value / base - 1.0, bench.runs, bench.detail())


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


def _sampler(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed) if kind == "random" else optuna.samplers.TPESampler(seed=seed)


def optuna_search(land: Landscape, seed: int, budget: int, sampler: str) -> Choice:
    """One baseline run, then ``budget - 1`` trials of ``sampler`` (``random`` or ``tpe``) on raw tokens/s.

    A failed run (OOM, infrastructure) is a failed trial, as a plain Optuna objective that raises would record it.
    """
    bench = Bench(land, seed, STREAMS["random" if sampler == "random" else "tpe"])
    base = _baseline_level(bench, 1)
    study = optuna.create_study(direction="maximize", sampler=_sampler(sampler, seed))
    dists = distributions(land)
    best: tuple[float, dict[str, Any]] = (base, {})
    while bench.runs < budget:
        trial = study.ask(dists)
        measured = bench.measure(trial.params)
        if measured is None or not math.isfinite(measured):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        study.tell(trial, measured)
        if measured > best[0]:
            best = (measured, dict(trial.params))
    return Choice(best[1], best[0] / base - 1.0, bench.runs, bench.detail())


#: TPE with repeats: a baseline control every this many launches, and this many runs of a leading proposal.
CONTROL_EVERY = 4
REPEATS = 3
TOP = 3


def _key(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in settings.items()))


def tpe_with_repeats(land: Landscape, seed: int, budget: int) -> Choice:
    """TPE on drift-corrected gains, re-running its leading proposals and interleaving baseline controls.

    What flagopt's engine does, built from plain parts: a baseline control on every ``CONTROL_EVERY``-th launch;
    each proposal's gain over the drift level (the mean of the last two controls) is told to TPE; a proposal
    whose gain ranks in the top ``TOP`` so far is re-run until it has ``REPEATS`` runs. At the end every run is
    corrected again with the level interpolated between the controls around it, and the pick is the arm with the
    best mean gain among those with the most runs (>= 2 when any); its claim is that mean, with a 95 % t-interval
    that also carries the baseline's uncertainty. Same total launches as ``budget``.
    """
    bench = Bench(land, seed, STREAMS["tpe-repeats"])
    controls: list[tuple[int, float]] = []
    runs: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = {}
    settings_of: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    study = optuna.create_study(direction="maximize", sampler=_sampler("tpe", seed))
    dists = distributions(land)
    queue: list[dict[str, Any]] = []

    def control() -> None:
        index = bench.runs
        measured = bench.measure({}, control=True)
        if measured is not None:
            controls.append((index, measured))

    def level() -> float:
        return float(np.mean([v for _, v in controls[-2:]]))

    control()
    while not controls and bench.runs < budget:
        control()
    while bench.runs < budget:
        if bench.runs % CONTROL_EVERY == 0:
            control()
            continue
        if queue:
            settings = queue.pop(0)
            trial = None
        else:
            trial = study.ask(dists)
            settings = dict(trial.params)
        key = _key(settings)
        settings_of[key] = settings
        index = bench.runs
        measured = bench.measure(settings)
        if measured is None:
            if trial is not None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        gain = measured / level() - 1.0
        runs.setdefault(key, []).append((index, measured))
        if trial is not None:
            study.tell(trial, gain)
        means = sorted((float(np.mean([v / level() - 1.0 for _, v in r])) for r in runs.values()), reverse=True)
        if len(runs[key]) < REPEATS and gain >= means[min(TOP, len(means)) - 1] and settings not in queue:
            queue.extend([settings] * (REPEATS - len(runs[key])))
    return _pick_by_means(bench, controls, runs, settings_of)


def _pick_by_means(bench: Bench, controls: list[tuple[int, float]],
                   runs: Mapping[tuple[tuple[str, str], ...], list[tuple[int, float]]],
                   settings_of: Mapping[tuple[tuple[str, str], ...], dict[str, Any]]) -> Choice:
    """The arm with the best drift-corrected mean among the most-repeated ones, with a 95 % interval."""
    if not runs or not controls:
        return Choice({}, 0.0, bench.runs, bench.detail(ci=None))
    at, level = np.array([i for i, _ in controls], float), np.array([v for _, v in controls])

    def gains(r: list[tuple[int, float]]) -> np.ndarray:
        return np.array([v / float(np.interp(i, at, level)) - 1.0 for i, v in r])

    most = min(max(len(r) for r in runs.values()), 2)
    eligible = {k: gains(r) for k, r in runs.items() if len(r) >= most}
    key = max(eligible, key=lambda k: float(eligible[k].mean()))
    g = eligible[key]
    # the controls' scatter around their linear drift, relative: the noise of the level the gains divide by
    base_sd = 0.0
    if len(level) > 2:
        residual = (level - np.polyval(np.polyfit(at, level, 1), at)) / level.mean()
        base_sd = float(np.std(residual, ddof=2))
    sd = float(np.std(g, ddof=1)) if len(g) > 1 else base_sd * math.sqrt(2.0)
    se = math.sqrt(sd**2 / len(g) + base_sd**2 / len(level))
    dof = max(len(g) - 1, 1)
    half = float(sstats.t.ppf(0.975, dof)) * se
    mean = float(g.mean())
    return Choice(settings_of[key], mean, bench.runs, bench.detail(ci=[mean - half, mean + half]))


def skopt_search(land: Landscape, seed: int, budget: int, estimator: str = "ET") -> Choice | None:
    """scikit-optimize's ``Optimizer`` (extra-trees surrogate by default) on raw tokens/s, ask/tell, same budget.

    One baseline run first; a failed run is told the worst value seen so far (skopt has no failed state). Returns
    ``None`` when scikit-optimize is not installed (``pip install -e .[bench]``).
    """
    try:
        from skopt import Optimizer
        from skopt.space import Categorical, Integer, Real
    except ImportError:
        return None
    bench = Bench(land, seed, STREAMS["skopt"])
    base = _baseline_level(bench, 1)
    names, dims = [], []
    for name, entry in land.space_params().items():
        names.append(name)
        if entry["type"] == "bool":
            dims.append(Categorical([True, False], name=name))
        elif entry["type"] == "categorical":
            dims.append(Categorical(list(entry["choices"]), name=name))
        elif entry["type"] == "int":
            dims.append(Integer(int(entry["low"]), int(entry["high"]),
                                prior="log-uniform" if entry["log"] else "uniform", base=2, name=name))
        else:
            dims.append(Real(float(entry["low"]), float(entry["high"]),
                             prior="log-uniform" if entry["log"] else "uniform", name=name))
    opt = Optimizer(dims, base_estimator=estimator, random_state=seed, n_initial_points=8,
                    acq_optimizer="sampling", acq_optimizer_kwargs={"n_points": 500})
    best: tuple[float, dict[str, Any]] = (base, {})
    worst = base
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "evaluated at point ... before": skopt then picks randomly
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in its log-uniform transform of 2**36-wide ints
        while bench.runs < budget:
            point = opt.ask()
            settings = {n: _clamp(land, n, _plain(v)) for n, v in zip(names, point, strict=True)}
            measured = bench.measure(settings)
            if measured is None:
                opt.tell(point, -worst)
                continue
            worst = min(worst, measured)
            opt.tell(point, -measured)
            if measured > best[0]:
                best = (measured, settings)
    return Choice(best[1], best[0] / base - 1.0, bench.runs, bench.detail())


def _clamp(land: Landscape, name: str, value: Any) -> Any:
    """An int inside the param's declared range (skopt's log transform can round one past a bound)."""
    param = land.params[name]
    if param.type == "int" and param.low is not None and param.high is not None:
        return int(min(max(int(value), int(param.low)), int(param.high)))
    return value


def _plain(value: Any) -> Any:
    """numpy scalars (skopt's) as Python values, so settings compare and serialise like Optuna's."""
    return value.item() if hasattr(value, "item") else value
