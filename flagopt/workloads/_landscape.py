"""The simulated job's truth: a landscape (``landscapes.yaml``) of params, effects, interactions, cliffs, noise,
drift and infrastructure faults; ``Landscape`` answers what a configuration truly gains and samples one run of it.

The landscapes file is read by :mod:`flagopt.workloads._landscapes_file`; the job process that plays a landscape is
:mod:`flagopt.workloads.sim`, which re-exports both modules' names.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flagopt.workloads import _emit
from flagopt.workloads._sim_param import SimParam, Value



LANDSCAPES = Path(__file__).with_name("landscapes.yaml")
TARGETS = ("xla", "env", "args")
_RESERVED = {"landscape": "", "seed": "0", "steps": "15", "step_s": "0.0", "launch": "", "landscapes": ""}
#: The environment variable naming another landscapes file (the ``landscapes=`` argument wins over it).
LANDSCAPES_ENV = "FLAGOPT_SIM_LANDSCAPES"
#: Infrastructure failures a ``flaky:`` section may give a probability per launch, in the order they are drawn.
FLAKY_KINDS = ("nccl_init", "coordination_timeout", "hang", "sigterm_after")
#: Seconds from process start to the first compile (imports, device and distributed initialisation).
STARTUP_S = 20.0
#: The JAX coordination service declares a task dead after 10 missed heartbeats of 10 s.
HEARTBEAT_TIMEOUT_S = 100.0
#: What the runner's hang watchdog waits by default (``failures.hang_min: 10``) when the caller does not say.
DEFAULT_HANG_S = 600.0


class SimulatedFailure(Exception):
    """A run that fails the way the real job would: ``kind`` is ``oom`` or ``unknown_flag``, ``text`` its output."""

    def __init__(self, kind: str, text: str, exit_code: int) -> None:
        super().__init__(text)
        self.kind, self.text, self.exit_code = kind, text, exit_code


def _matches(when: Mapping[str, Any], settings: Mapping[str, Value]) -> bool:
    for name, cond in when.items():
        value = settings.get(name)
        if isinstance(cond, Mapping):
            if value is None and ("ge" in cond or "le" in cond):
                return False
            if "ge" in cond and not value >= cond["ge"]:  # type: ignore[operator]
                return False
            if "le" in cond and not value <= cond["le"]:  # type: ignore[operator]
                return False
            if "in" in cond and value not in cond["in"]:
                return False
        elif value != cond:
            return False
    return True


@dataclass(frozen=True)
class Best:
    """The true best configuration over the grid (every param resolved) and its true gain."""

    settings: Mapping[str, Value]
    gain: float


@dataclass(frozen=True)
class Landscape:
    """A truth model: throughput of any configuration, its noise and drift, OOM regions and unknown flags."""

    name: str
    description: str
    jaxlib: str
    devices: int
    tokens_per_s: float
    total_weights: int
    tflops_per_token: float
    compile_s: float
    noise: Mapping[str, float]
    drift_model: Mapping[str, float]
    baseline: Mapping[str, Value]
    params: Mapping[str, SimParam]
    interactions: tuple[Mapping[str, Any], ...] = ()
    ooms: tuple[Mapping[str, Any], ...] = ()
    unknown_flags: frozenset[str] = frozenset()
    flaky: Mapping[str, float] = field(default_factory=dict)
    #: Exposed communication the overlap settings share (``gain``, ``hides``: ``when`` -> ``share``): each member
    #: hides its share of what the others left, so together they give less than the sum of their gains alone.
    pool: Mapping[str, Any] | None = None
    #: Catalog profiles (name -> ``{xla: ..., env: ...}``) the search space offers, as a real space would.
    profiles: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""  # the landscapes file it was read from ("" = the shipped one)

    def resolve(self, settings: Mapping[str, Any], *, on_baseline: bool = True) -> dict[str, Value]:
        """Every param's value: defaults, then the deployed baseline (``on_baseline``), then ``settings``.

        ``settings`` is flat (``{name: value}``) or a trial record's ``{"xla": {...}, "env": {...}, ...}``.
        """
        flat = _flatten(settings)
        out = {name: p.default for name, p in self.params.items()}
        if on_baseline:
            out.update(self.baseline)
        for name, raw in flat.items():
            if name in self.params:
                out[name] = self.params[name].coerce(raw)
        return out

    def _factor(self, resolved: Mapping[str, Value], names: Iterable[str] | None = None) -> float:
        out = math.prod(self.params[n].factor(resolved[n]) for n in (names or self.params))
        for inter in self.interactions:
            if _matches(inter["when"], resolved):
                out *= 1.0 + float(inter["gain"])
        if self.pool:
            left = math.prod(1.0 - float(m["share"]) for m in self.pool["hides"] if _matches(m["when"], resolved))
            out *= 1.0 + float(self.pool["gain"]) * (1.0 - left)
        return out

    def true_gain(self, settings: Mapping[str, Any], *, on_baseline: bool = True) -> float:
        """Noise-free relative gain of ``settings`` over the deployed baseline (0.116 = +11.6 %)."""
        return self._factor(self.resolve(settings, on_baseline=on_baseline)) / self._factor(self.resolve({})) - 1.0

    def drift(self, run_index: float) -> float:
        """Baseline level factor at launch ``run_index``: linear over ``launches`` plus a slow sine, and a level shift
        of ``shift`` from launch ``shift_at`` on (a node group swapped, a neighbour's job on the fabric)."""
        d = self.drift_model
        phase = 2.0 * math.pi * run_index / float(d.get("period", 1.0))
        shift = float(d.get("shift", 0.0)) if run_index >= float(d.get("shift_at", math.inf)) else 0.0
        return 1.0 + float(d["total"]) * run_index / float(d["launches"]) + float(d.get("sine", 0.0)) * math.sin(phase) \
            + shift

    def oom_bytes(self, settings: Mapping[str, Any], *, on_baseline: bool = True) -> int | None:
        """Bytes the job fails to allocate for ``settings``, or ``None`` when it fits."""
        resolved = self.resolve(settings, on_baseline=on_baseline)
        return next((int(o["bytes"]) for o in self.ooms if _matches(o["when"], resolved)), None)

    def oom_rule(self, settings: Mapping[str, Any], *, on_baseline: bool = True) -> int | None:
        """Index (in ``oom:``) of the first OOM rule ``settings`` falls in, or ``None`` when it fits."""
        resolved = self.resolve(settings, on_baseline=on_baseline)
        return next((i for i, o in enumerate(self.ooms) if _matches(o["when"], resolved)), None)

    def check_flags(self, names: Iterable[str], tokens: Sequence[str] | None = None) -> None:
        """Raise the unknown-flag failure when any of ``names`` is one this landscape's jaxlib rejects."""
        bad = [n for n in names if n in self.unknown_flags]
        if bad:
            shown = [t for t in tokens or () if t.lstrip("-").split("=", 1)[0] in bad] or [f"--{n}" for n in bad]
            code = _emit.unknown_flags_exit_code(self.jaxlib)
            raise SimulatedFailure("unknown_flag", _emit.unknown_flags_message(shown, self.jaxlib), code)

    def sample_run(
        self,
        settings: Mapping[str, Any],
        run_index: int,
        rng: np.random.Generator,
        steps: int = 15,
        *,
        on_baseline: bool = True,
        drift_index: float | None = None,
        speed: float = 1.0,
    ) -> list[float]:
        """Per-step tokens/s/device of one run at launch ``run_index`` (step 0 includes compilation).

        ``drift_index`` (default ``run_index``) is where on the drift curve the run falls, ``speed`` the factor of
        the node it runs on (a node group a few percent slower than another).

        Raises:
            SimulatedFailure: an unknown flag or an OOM region, with the real job's output.
        """
        self.check_flags(_flatten(settings))
        oom = self.oom_bytes(settings, on_baseline=on_baseline)
        if oom is not None:
            raise SimulatedFailure("oom", _emit.oom_message(oom), _emit.RUNTIME_ERROR_EXIT_CODE)
        gain = self.true_gain(settings, on_baseline=on_baseline)
        level = self.tokens_per_s * (1.0 + gain) * self.drift(run_index if drift_index is None else drift_index) * speed
        level *= 1.0 + float(self.noise["run"]) * rng.standard_normal()
        if self.noise.get("straggler"):
            # A straggler: now and then one run is slower by ``straggler_cost`` (half to one and a half times), a slow
            # node or a noisy neighbour for that run only. Drawn only where configured: other landscapes' noise is kept.
            slow, size = rng.random() < float(self.noise["straggler"]), float(self.noise.get("straggler_cost", 0.03))
            level *= 1.0 - (size * (0.5 + rng.random()) if slow else 0.0)
        values = level * (1.0 + float(self.noise["step"]) * rng.standard_normal(steps))
        per_step = self.total_weights / self.devices
        if steps:
            values[0] = per_step / (per_step / values[0] + self.compile_s)
        if steps > 1:
            values[1] *= 0.985  # the first steady step still warms caches
        return [float(v) for v in values]

    def infra_fault(self, seed: int, launch: int, stream: int = 0) -> str | None:
        """The infrastructure failure (one of :data:`FLAKY_KINDS`) launch ``launch`` suffers, or ``None``.

        Deterministic in ``(seed, launch, stream)`` and drawn from its own generator, so a landscape without a
        ``flaky:`` section draws nothing and its noise is unchanged.

        Example:
            >>> from flagopt.workloads.sim import load_landscape
            >>> land = load_landscape("flaky")
            >>> land.infra_fault(0, 3) == land.infra_fault(0, 3)
            True
        """
        if not self.flaky:
            return None
        draw = float(np.random.default_rng([seed, launch, 2, stream]).random())
        edge = 0.0
        for kind in FLAKY_KINDS:
            edge += float(self.flaky.get(kind, 0.0))
            if draw < edge:
                return kind
        return None

    def hang_after(self, seed: int, launch: int, steps: int, stream: int = 0) -> int:
        """How many step lines a hanging launch prints before it stops (at least 1, fewer than ``steps``)."""
        rng = np.random.default_rng([seed, launch, 3, stream])
        return int(rng.integers(1, max(steps, 2)))

    def lowest_factor(self) -> float:
        """The smallest throughput factor one setting or interaction can apply (0.6 = that setting costs 40 %).

        A real job's throughput stays positive, so a valid landscape keeps this above 0: with two negative factors
        their product is positive, and the "best" configuration would be two settings that each break the job
        alone (a truth no job has; ``benchmarks/_random_landscapes.py`` redraws such a landscape).

        Example:
            >>> from flagopt.workloads.sim import load_landscape
            >>> load_landscape("win10").lowest_factor()
            0.99
        """
        return min((*(1.0 + float(i["gain"]) for i in self.interactions),
                    *(param.lowest_factor() for param in self.params.values())), default=1.0)

    def best(self) -> Best:
        """The true best configuration over every param's candidates, excluding OOM regions and the flags this
        landscape's jaxlib does not know (no run can set them: they stay as deployed), for regret.

        Params outside every interaction and OOM condition are optimised one by one (their effects multiply);
        the coupled ones are enumerated jointly, so the answer is exact for the model.
        """
        pooled = self.pool["hides"] if self.pool else ()
        coupled = {n for item in (*self.interactions, *self.ooms, *pooled) for n in item["when"]}
        chosen = self.resolve({})
        settable = {n: p.candidates(self._oom_edges(n)) if n not in self.unknown_flags else [chosen[n]]
                    for n, p in self.params.items()}
        for name in set(self.params) - coupled:
            param, current = self.params[name], chosen[name]
            # on a tie the deployed value stays: "change nothing" is the answer of a flat landscape
            chosen[name] = max(settable[name], key=lambda v, p=param, c=current: (round(p.factor(v), 12), v == c))
        names = sorted(coupled)
        best_combo = tuple(chosen[n] for n in names)
        oom_now = any(_matches(o["when"], chosen) for o in self.ooms)
        best_key = -math.inf if oom_now else round(self._factor(chosen, names), 12)
        for combo in itertools.product(*(settable[n] for n in names)):
            trial = {**chosen, **dict(zip(names, combo, strict=True))}
            if any(_matches(o["when"], trial) for o in self.ooms):
                continue
            key = round(self._factor(trial, names), 12)
            if key > best_key:
                best_key, best_combo = key, combo
        chosen.update(zip(names, best_combo, strict=True))
        return Best(settings=chosen, gain=self.true_gain(chosen, on_baseline=False))

    def _oom_edges(self, name: str) -> tuple[float, ...]:
        """The last values of numeric param ``name`` before each OOM rule's ``ge`` / ``le`` bound on it (a threshold
        one byte below the size that runs out of memory), which a sampler can pick and a grid misses."""
        param, edges = self.params[name], []
        if param.type not in ("int", "float"):
            return ()
        for rule in self.ooms:
            cond = rule["when"].get(name)
            if not isinstance(cond, Mapping):
                continue
            if "ge" in cond:
                edges.append(cond["ge"] - 1 if param.type == "int" else math.nextafter(float(cond["ge"]), -math.inf))
            if "le" in cond:
                edges.append(cond["le"] + 1 if param.type == "int" else math.nextafter(float(cond["le"]), math.inf))
        return tuple(edges)

    def space_params(self) -> dict[str, dict[str, Any]]:
        """Search-space entries (no truth) per param: target, type, range or choices, default."""
        out: dict[str, dict[str, Any]] = {}
        for name, p in self.params.items():
            if not p.tunable:
                continue
            entry: dict[str, Any] = {"target": p.target, "type": p.type, "default": p.default}
            if p.type in ("int", "float"):
                entry.update(low=p.low, high=p.high, log=p.log)
            if p.choices:
                entry["choices"] = list(p.choices)
            out[name] = entry
        return out

    def baseline_settings(self) -> dict[str, dict[str, Value]]:
        """The deployed baseline as a trial record's ``{"xla": ..., "env": ..., "args": ...}``."""
        out: dict[str, dict[str, Value]] = {t: {} for t in TARGETS}
        for name, value in self.baseline.items():
            out[self.params[name].target][name] = value
        return out


def _flatten(settings: Mapping[str, Any]) -> dict[str, Any]:
    if settings and all(k in (*TARGETS, "libtpu") and isinstance(v, Mapping) for k, v in settings.items()):
        return {k.lstrip("-"): v for part in settings.values() for k, v in part.items()}
    return {str(k).lstrip("-"): v for k, v in settings.items()}
