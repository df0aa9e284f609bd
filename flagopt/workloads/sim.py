"""A simulated cluster job with a known truth: for benchmarks of the search and end-to-end tests of the tool.

``python -m flagopt.workloads.sim landscape=<name> seed=<n> steps=15 step_s=0.0 [key=value ...]`` reads
``XLA_FLAGS`` (a repeated flag resolves last-wins, like XLA), the landscape's environment variables
(``NCCL_PROTO``...) and ``key=value`` workload arguments (``num_pipeline_microbatches=16``), evaluates the
landscape's truth model and prints MaxText step lines (step 0 includes compilation). A flag the landscape lists as
unknown aborts at start with XLA's real message; an OOM region prints the real ``RESOURCE_EXHAUSTED`` block and
exits 1. Drift follows the launch index, counted across processes in the file named by ``FLAGOPT_SIM_STATE``
(``launch=<i>`` overrides it).

The truth models are data (``landscapes.yaml``); the same model is usable in-process, so a benchmark can sample
thousands of runs without processes.

Example:
    >>> land = load_landscape("fsdp64")
    >>> round(land.true_gain({"xla_gpu_all_gather_combine_threshold_bytes": 2**30}), 3)
    0.116
"""

from __future__ import annotations

import fcntl
import itertools
import math
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from flagopt.errors import FlagoptError
from flagopt.workloads import _emit

Value = bool | int | float | str | None
LANDSCAPES = Path(__file__).with_name("landscapes.yaml")
TARGETS = ("xla", "env", "args")
_RESERVED = {"landscape": "", "seed": "0", "steps": "15", "step_s": "0.0", "launch": ""}


class SimulatedFailure(Exception):
    """A run that fails the way the real job would: ``kind`` is ``oom`` or ``unknown_flag``, ``text`` its output."""

    def __init__(self, kind: str, text: str, exit_code: int) -> None:
        super().__init__(text)
        self.kind, self.text, self.exit_code = kind, text, exit_code


@dataclass(frozen=True)
class SimParam:
    """One tunable of a landscape: its search-space entry and its true effect."""

    name: str
    target: str
    type: str
    default: Value
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Value, ...] = ()
    explicit_grid: tuple[Value, ...] = ()
    effect: Mapping[str, Any] | None = None

    def coerce(self, raw: Any) -> Value:
        """Parse a value as the job would (``"true"`` -> True, ``"1073741824"`` -> int)."""
        if raw is None:
            return None
        if self.type == "bool":
            return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("true", "1", "yes")
        if self.type == "int":
            return int(raw)
        if self.type == "float":
            return float(raw)
        return str(raw)

    def grid(self) -> tuple[Value, ...]:
        """The values ``Landscape.best`` searches: explicit ``grid``, or powers of two / every integer / choices."""
        if self.explicit_grid:
            values: list[Value] = list(self.explicit_grid)
        elif self.type == "bool":
            values = [False, True]
        elif self.type == "categorical":
            values = [None, *self.choices] if self.default is None else list(self.choices)
        elif self.type == "int" and self.log:
            lo, hi = math.ceil(math.log2(self.low or 1)), math.floor(math.log2(self.high or 1))
            values = [2**k for k in range(lo, hi + 1)]
        elif self.type == "int":
            values = list(range(int(self.low or 0), int(self.high or 0) + 1))
        else:
            values = [float(v) for v in np.linspace(self.low or 0.0, self.high or 0.0, 9)]
        return tuple(dict.fromkeys([*values, self.default]))

    def factor(self, value: Value) -> float:
        """Relative throughput factor of ``value`` under this param's effect (1.0 = no effect)."""
        effect = self.effect or {}
        out = 1.0
        if "values" in effect:
            out *= 1.0 + float(effect["values"].get(value, 0.0))
        if "bump" in effect and value:
            bump = effect["bump"]
            z = (math.log2(float(value)) - math.log2(float(bump["center"]))) / float(bump["width"])
            out *= 1.0 + float(bump["height"]) * math.exp(-0.5 * z * z)
        if "bubble" in effect and value:
            stages, overhead = float(effect["bubble"]["stages"]), float(effect["bubble"]["overhead"])
            out /= (1.0 + (stages - 1.0) / float(value)) * (1.0 + overhead * float(value))
        return out


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
        return out

    def true_gain(self, settings: Mapping[str, Any], *, on_baseline: bool = True) -> float:
        """Noise-free relative gain of ``settings`` over the deployed baseline (0.116 = +11.6 %)."""
        return self._factor(self.resolve(settings, on_baseline=on_baseline)) / self._factor(self.resolve({})) - 1.0

    def drift(self, run_index: int) -> float:
        """Baseline level factor at launch ``run_index``: linear over ``launches`` plus a slow sine."""
        d = self.drift_model
        phase = 2.0 * math.pi * run_index / float(d.get("period", 1.0))
        return 1.0 + float(d["total"]) * run_index / float(d["launches"]) + float(d.get("sine", 0.0)) * math.sin(phase)

    def oom_bytes(self, settings: Mapping[str, Any], *, on_baseline: bool = True) -> int | None:
        """Bytes the job fails to allocate for ``settings``, or ``None`` when it fits."""
        resolved = self.resolve(settings, on_baseline=on_baseline)
        return next((int(o["bytes"]) for o in self.ooms if _matches(o["when"], resolved)), None)

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
    ) -> list[float]:
        """Per-step tokens/s/device of one run at launch ``run_index`` (step 0 includes compilation).

        Raises:
            SimulatedFailure: an unknown flag or an OOM region, with the real job's output.
        """
        self.check_flags(_flatten(settings))
        oom = self.oom_bytes(settings, on_baseline=on_baseline)
        if oom is not None:
            raise SimulatedFailure("oom", _emit.oom_message(oom), _emit.RUNTIME_ERROR_EXIT_CODE)
        gain = self.true_gain(settings, on_baseline=on_baseline)
        level = self.tokens_per_s * (1.0 + gain) * self.drift(run_index)
        level *= 1.0 + float(self.noise["run"]) * rng.standard_normal()
        values = level * (1.0 + float(self.noise["step"]) * rng.standard_normal(steps))
        per_step = self.total_weights / self.devices
        if steps:
            values[0] = per_step / (per_step / values[0] + self.compile_s)
        if steps > 1:
            values[1] *= 0.985  # the first steady step still warms caches
        return [float(v) for v in values]

    def best(self) -> Best:
        """The true best configuration over every param's grid, excluding OOM regions (for regret).

        Params outside every interaction and OOM condition are optimised one by one (their effects multiply);
        the coupled ones are enumerated jointly, so the answer is exact for the model.
        """
        coupled = {n for item in (*self.interactions, *self.ooms) for n in item["when"]}
        chosen = self.resolve({})
        for name in set(self.params) - coupled:
            param, current = self.params[name], chosen[name]
            # on a tie the deployed value stays: "change nothing" is the answer of a flat landscape
            chosen[name] = max(param.grid(), key=lambda v, p=param, c=current: (round(p.factor(v), 12), v == c))
        names = sorted(coupled)
        best_combo = tuple(chosen[n] for n in names)
        oom_now = any(_matches(o["when"], chosen) for o in self.ooms)
        best_key = -math.inf if oom_now else round(self._factor(chosen, names), 12)
        for combo in itertools.product(*(self.params[n].grid() for n in names)):
            trial = {**chosen, **dict(zip(names, combo, strict=True))}
            if any(_matches(o["when"], trial) for o in self.ooms):
                continue
            key = round(self._factor(trial, names), 12)
            if key > best_key:
                best_key, best_combo = key, combo
        chosen.update(zip(names, best_combo, strict=True))
        return Best(settings=chosen, gain=self.true_gain(chosen, on_baseline=False))

    def space_params(self) -> dict[str, dict[str, Any]]:
        """Search-space entries (no truth) per param: target, type, range or choices, default."""
        out: dict[str, dict[str, Any]] = {}
        for name, p in self.params.items():
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


def landscape_names(path: Path = LANDSCAPES) -> list[str]:
    """Names of the landscapes in ``path``."""
    return list(yaml.safe_load(path.read_text()))


def load_landscape(name: str, path: Path = LANDSCAPES) -> Landscape:
    """Read one landscape from ``landscapes.yaml`` (or ``path``)."""
    data = yaml.safe_load(path.read_text())
    if name not in data:
        raise FlagoptError(str(path), "landscape", f"unknown landscape {name!r}; choose one of {sorted(data)}")
    d = data[name]
    params = {
        pname: SimParam(
            name=pname,
            target=p["target"],
            type=p["type"],
            default=p.get("default"),
            low=p.get("low"),
            high=p.get("high"),
            log=bool(p.get("log", False)),
            choices=tuple(p.get("choices", ())),
            explicit_grid=tuple(p.get("grid", ())),
            effect=p.get("effect"),
        )
        for pname, p in d["params"].items()
    }
    return Landscape(
        name=name,
        description=d["description"],
        jaxlib=str(d["jaxlib"]),
        devices=int(d["devices"]),
        tokens_per_s=float(d["tokens_per_s"]),
        total_weights=int(d["total_weights"]),
        tflops_per_token=float(d["tflops_per_token"]),
        compile_s=float(d["compile_s"]),
        noise=d["noise"],
        drift_model=d["drift"],
        baseline={k: params[k].coerce(v) for k, v in (d.get("baseline") or {}).items()},
        params=params,
        interactions=tuple(d.get("interactions") or ()),
        ooms=tuple(d.get("oom") or ()),
        unknown_flags=frozenset(d.get("unknown_flags") or ()),
    )


def parse_xla_flags(xla_flags: str) -> tuple[dict[str, str], list[str]]:
    """``--name=value`` tokens -> ``{name: value}`` with the LAST occurrence winning, and the raw tokens.

    Example:
        >>> parse_xla_flags("--xla_a=1 --xla_b --xla_a=4")[0]
        {'xla_a': '4', 'xla_b': 'true'}
    """
    tokens = shlex.split(xla_flags)
    flags: dict[str, str] = {}
    for token in tokens:
        name, _, value = token.lstrip("-").partition("=")
        flags[name] = value if "=" in token else "true"
    return flags, tokens


def _next_launch(state: str) -> int:
    """Count this launch in the state file (locked: concurrent launches get distinct indices)."""
    path = Path(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        before = int(handle.read().strip() or 0)
        handle.seek(0)
        handle.truncate()
        handle.write(str(before + 1))
    return before


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulated job; returns its exit status (or dies of SIGABRT like an old jaxlib)."""
    opts, args = dict(_RESERVED), {}
    for item in sys.argv[1:] if argv is None else argv:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"sim: argument {item!r} is not key=value", file=sys.stderr)
            return _emit.RUNTIME_ERROR_EXIT_CODE
        (opts if key in _RESERVED else args)[key] = value
    land = load_landscape(opts["landscape"])
    xla, tokens = parse_xla_flags(os.environ.get("XLA_FLAGS", ""))
    unknown_args = sorted(k for k in args if _target_of(land, k) != "args")
    if unknown_args:
        print(f"sim: unknown workload argument(s) {unknown_args} for landscape {land.name}", file=sys.stderr)
        return _emit.RUNTIME_ERROR_EXIT_CODE
    env = {n: os.environ[n] for n, p in land.params.items() if p.target == "env" and n in os.environ}
    settings = {**xla, **env, **args}
    launch = int(opts["launch"]) if opts["launch"] else _launch_index()
    rng = np.random.default_rng([int(opts["seed"]), launch])
    try:
        land.check_flags(xla, tokens)
        values = land.sample_run(settings, launch, rng, int(opts["steps"]), on_baseline=False)
    except SimulatedFailure as failure:
        print(failure.text, file=sys.stderr, flush=True)
        if failure.exit_code == _emit.UNKNOWN_FLAG_EXIT_CODE_OLD:
            os.kill(os.getpid(), signal.SIGABRT)
        return failure.exit_code
    per_step = land.total_weights / land.devices
    loss_rng = np.random.default_rng([int(opts["seed"]), launch, 1])
    for step, tokens_per_s in enumerate(values):
        time.sleep(float(opts["step_s"]))
        loss = 2.3 + 8.5 * math.exp(-step / 6.0) + 0.01 * float(loss_rng.standard_normal())
        line = _emit.step_line(
            step, per_step / tokens_per_s, tokens_per_s * land.tflops_per_token, tokens_per_s, land.total_weights, loss
        )
        print(line, flush=True)
    return 0


def _target_of(land: Landscape, name: str) -> str | None:
    """The target (``xla``/``env``/``args``) of a landscape param, ``None`` for a name it does not know."""
    param = land.params.get(name)
    return param.target if param else None


def _launch_index() -> int:
    state = os.environ.get("FLAGOPT_SIM_STATE", "")
    return _next_launch(state) if state else 0


if __name__ == "__main__":
    sys.exit(main())
