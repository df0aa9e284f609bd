"""What to measure before the sampler: one-factor screening probes, their refinement, and the combination.

Flag effects are mostly separable (a threshold, a protocol, a scheduler switch each move throughput on their own)
with a few interactions and cliffs. So the planner screens first, as a careful engineer does: every catalog
profile, then each param alone on top of the deployed job (one run per value, booleans and categoricals over their
choices, numeric ranges over a coarse geometric or linear grid), then the neighbours of the best grid point of a
numeric param, then the combination of every param's best value. Racing (``flagopt.stats.next_to_sample``)
re-runs only the probes that could matter, and the sampler explores what the screen cannot see (pairs of flags
that only help together).

Every configuration here carries only the settings that differ from the deployed job, so probes, the combination
and sampled points that set the same values share one arm (and the exported patch is the few flags that matter).

Example:
    >>> from flagopt.space import Param
    >>> p = Param("ag", "xla", "xla_gpu_all_gather_combine_threshold_bytes", type="int", low=2**26, high=2**36, log=True)
    >>> [v.bit_length() - 1 for v in probe_values(p, str(2**33))]
    [26, 28, 30, 32, 34, 36]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flagopt.space import Param, Space, TrialConfig, render_value

Scalar = bool | int | float | str
#: Grid points of one numeric param in the screen; more cost runs, fewer miss a narrow optimum.
MAX_GRID = 6
#: A numeric range wider than this many octaves is screened every two octaves, then refined around the best.
WIDE_OCTAVES = 8.0
_TARGET_PART = {"xla": "xla", "libtpu": "libtpu", "env": "env", "arg": "args"}
#: A measurement this many run-noise sigmas, and at least ``CLEAR_DROP_MIN``, below the deployed job is clearly below
#: it (:func:`clear_drop`). A smaller drop is within a drifting job's reach (null-1042: a threshold probe 2.9 % low
#: under 3 % drift started a refinement, a combination and a false budget claim).
CLEAR_DROP_SIGMAS = 3.0
CLEAR_DROP_MIN = 0.05


def clear_drop(sigma: float) -> float:
    """How far below the deployed job a measurement must be to be clearly below it, for run noise ``sigma``: the
    bar of a param whose response is curved around its deployed value, and of a catalog profile run without each of
    its settings.

    Example:
        >>> clear_drop(0.01), clear_drop(0.03)
        (0.05, 0.09)
    """
    return max(CLEAR_DROP_SIGMAS * sigma, CLEAR_DROP_MIN)


def deployed_values(space: Space, default_of: Callable[[str], Any] | None = None) -> dict[str, str | None]:
    """Each param's value in the deployed job, rendered as text (``None``: unset or unknown).

    A flag the deployed ``XLA_FLAGS`` does not set runs at its image default (``baseline.defaults``, else the param's
    own ``default:``, else ``default_of``, e.g. the flag registry); an env var or workload arg the deployed job does
    not set is unset, unless the param states its ``default:``.
    """
    flags: dict[str, str] = {}
    for target, tokens in (("xla", space.baseline.xla_flags), ("libtpu", space.baseline.libtpu_flags)):
        for token in tokens:
            name, sep, value = token.lstrip("-").partition("=")
            flags[f"{target}:{name}"] = value if sep else "true"
    env = dict(space.baseline.env)
    args = {k: render_value(v) for k, v in space.baseline.args}
    defaults = {k: render_value(v) for k, v in space.baseline.defaults}
    out: dict[str, str | None] = {}
    for p in space.params:
        if p.target in ("xla", "libtpu"):
            value = flags.get(f"{p.target}:{p.key}", defaults.get(p.key))
            if value is None and p.default is not None:
                value = render_value(p.default)  # what the space says the job runs without it: never re-probed
            if value is None and default_of is not None and default_of(p.key) is not None:
                value = render_value(default_of(p.key))
        elif p.target == "env":
            value = env.get(p.key, defaults.get(p.key))
        else:
            value = args.get(p.key)
        if value is None and p.default is not None:
            value = render_value(p.default)
        out[p.name] = value
    return out


def same_value(param: Param, value: Scalar, deployed: str | None) -> bool:
    """Whether ``value`` is what the deployed job already runs (numbers compared as numbers)."""
    if deployed is None:
        return False
    if param.type is not None or isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return math.isclose(float(value), float(deployed), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return render_value(value) == deployed


def _numeric_grid(param: Param) -> list[float]:
    low, high = float(param.low), float(param.high)  # type: ignore[arg-type]
    if param.log and low > 0:
        octaves = math.log2(high / low)
        step = 2.0 if octaves > WIDE_OCTAVES else 1.0
        count = int(math.floor(octaves / step + 1e-9)) + 1
        if count > MAX_GRID:
            step, count = octaves / (MAX_GRID - 1), MAX_GRID
        return [low * 2.0 ** (i * step) for i in range(count)]
    count = MAX_GRID if param.type == "float" else min(MAX_GRID, int(high - low) + 1)
    return [low + (high - low) * i / max(count - 1, 1) for i in range(count)]


def _cast(param: Param, value: float) -> Scalar:
    if param.type == "int":
        out = int(round(value))
        if param.step:
            out = int(param.low + round((out - param.low) / param.step) * param.step)  # type: ignore[operator]
        return int(min(max(out, param.low), param.high))  # type: ignore[type-var]
    if param.step:
        value = param.low + round((value - param.low) / param.step) * param.step  # type: ignore[operator]
    # six significant digits: a grid point of 0.5..0.95 is 0.68 in a label, an env.sh patch and a flag, not
    # 0.6799999999999999
    return float(min(max(float(f"{value:.6g}"), param.low), param.high))  # type: ignore[type-var]


def _values(param: Param) -> Sequence[Scalar] | None:
    """Every value ``param`` can take: its choices, or its int range (a lazy ``range``); ``None`` if continuous."""
    if param.choices is not None:
        return list(dict.fromkeys(param.choices))
    if param.type == "int":
        return range(int(param.low), int(param.high) + 1, int(param.step or 1))
    return None


def configurations(params: Sequence[Param], deployed: Mapping[str, str | None],
                   excluded: Callable[[str, Scalar], bool] | None = None) -> float:
    """How many configurations other than the deployed job ``params`` can set (``math.inf`` if one is continuous).

    ``excluded(name, value)``: a value no run may set (one that failed alone): it counts out of the space, as a
    value the study can never measure. The deployed value always counts.

    Example:
        >>> flags = [Param(f"f{i}", "xla", f"xla_f{i}", choices=(True, False)) for i in range(4)]
        >>> configurations(flags, {p.name: "false" for p in flags})
        15
        >>> configurations(flags, {p.name: "false" for p in flags}, excluded=lambda n, v: n == "f0" and v is True)
        7
        >>> mb = Param("mb", "arg", "num_microbatches", type="int", low=4, high=32, step=4)
        >>> configurations(flags + [mb], {"mb": "8", **{p.name: "false" for p in flags}})
        127
    """
    total = 1
    for param in params:
        values = _values(param)
        if values is None:
            return math.inf
        if isinstance(values, range) and (excluded is None or len(values) > 4096):
            total *= max(len(values), 1)  # a wide range counts as it is: it is only enumerated to count values out
            continue
        current = deployed.get(param.name)
        kept = sum(1 for v in values if same_value(param, v, current) or not (excluded and excluded(param.name, v)))
        deployed_among = any(same_value(param, v, current) for v in values)
        total *= max(kept + (0 if deployed_among else 1), 1)  # the deployed value the sampler cannot set back
    return total - 1


def every_configuration(params: Sequence[Param], deployed: Mapping[str, str | None],
                        excluded: Callable[[str, Scalar], bool] | None = None) -> list[dict[str, Scalar]]:
    """Every configuration of a finite space other than the deployed job, as the settings it changes (a param at its
    deployed value is left out), without ``excluded`` values; the few settings first. Only for a small space: see
    :func:`configurations` for its size.

    Example:
        >>> flags = [Param(f"f{i}", "xla", f"xla_f{i}", choices=(True, False)) for i in range(2)]
        >>> every_configuration(flags, {p.name: "false" for p in flags})
        [{'f1': True}, {'f0': True}, {'f0': True, 'f1': True}]
    """
    choices: list[list[Scalar | None]] = []
    for param in params:
        values = _values(param)
        if values is None:
            raise ValueError(f"{param.name}: a continuous param has no finite set of configurations")
        current = deployed.get(param.name)
        kept = [v for v in values if not same_value(param, v, current) and not (excluded and excluded(param.name, v))]
        choices.append([None, *kept])  # None: the deployed value
    out = [{p.name: v for p, v in zip(params, combo) if v is not None} for combo in itertools.product(*choices)]
    return sorted((c for c in out if c), key=len)


def probe_values(param: Param, deployed: str | None) -> list[Scalar]:
    """The values one-factor screening tries for ``param`` (never the deployed one), in order."""
    if param.choices is not None:
        values: list[Scalar] = list(param.choices)
    else:
        values = [_cast(param, v) for v in _numeric_grid(param)]
    out: list[Scalar] = []
    for v in values:
        if not same_value(param, v, deployed) and v not in out:
            out.append(v)
    return out


def probe_order(params: Sequence[Param], deployed: Mapping[str, str | None], budget: int) -> list[tuple[Param, Scalar]]:
    """Every one-factor probe ``(param, value)`` in the order the screen runs them.

    Param by param, each value in turn (the engineer's order), while the whole screen fits in three quarters of
    ``budget`` (every shipped space and random family: at most 27 probes of 60; every shipped space at the engineer's
    own run count), leaving the rest to the model's combination and the confirmations. A wider space goes breadth
    first: every param's first value, then every param's second, and so on, each numeric param's values spread out
    (its ends, then between them). Param by param, a 20-setting space spent its 60 runs on the first seventeen
    settings' probes and never measured the last one, a +6 % setting (stress-huge, docs/benchmark-decisions.md,
    fifty-first session note).

    Example:
        >>> a = Param("a", "xla", "a", type="bool", choices=(True, False))
        >>> b = Param("b", "env", "B", choices=("x", "y"))
        >>> [(p.name, v) for p, v in probe_order([a, b], {}, 60)]
        [('a', True), ('a', False), ('b', 'x'), ('b', 'y')]
        >>> [(p.name, v) for p, v in probe_order([a, b], {}, 4)]
        [('a', True), ('b', 'x'), ('a', False), ('b', 'y')]
    """
    values = {p.name: probe_values(p, deployed.get(p.name)) for p in params}
    if 4 * sum(len(v) for v in values.values()) <= 3 * budget:
        return [(p, v) for p in params for v in values[p.name]]
    spread = {p.name: values[p.name] if p.choices is not None else _spread(values[p.name]) for p in params}
    rounds = max((len(v) for v in spread.values()), default=0)
    return [(p, spread[p.name][i]) for i in range(rounds) for p in params if i < len(spread[p.name])]


def _spread(values: Sequence[Scalar]) -> list[Scalar]:
    """``values`` (ascending) reordered so that each prefix covers their range: both ends, then the midpoints.

    Example:
        >>> _spread([1, 2, 3, 4, 5, 6])
        [1, 6, 3, 2, 4, 5]
    """
    if len(values) <= 2:
        return list(values)
    out = [0, len(values) - 1]
    gaps = [(0, len(values) - 1)]
    while gaps:
        lo, hi = gaps.pop(0)
        if hi - lo < 2:
            continue
        mid = (lo + hi) // 2
        out.append(mid)
        gaps += [(lo, mid), (mid, hi)]
    return [values[i] for i in out] + [v for i, v in enumerate(values) if i not in out]


def refine_values(param: Param, measured: Mapping[Scalar, float], deployed: str | None, *,
                  around_deployed: bool = False) -> list[Scalar]:
    """Neighbours of the best screened value of a numeric param, halfway to the grid points beside it.

    ``measured`` maps screened values (the deployed one included, with gain 0) to their estimated gains. Returns
    nothing for a categorical param, and when the best value is the deployed one unless ``around_deployed``: then
    the point halfway to its better neighbour (the response is curved there, and its peak may lie between them).

    Example:
        >>> mb = Param("mb", "args", "num_microbatches", type="int", low=4, high=64, log=True)
        >>> refine_values(mb, {8: -0.09, 16: 0.0, 32: -0.005, 64: -0.1}, "16", around_deployed=True)
        [23]
    """
    if param.choices is not None or len(measured) < 2:
        return []
    ordered = sorted(measured, key=float)
    best = max(ordered, key=lambda v: measured[v])
    i = ordered.index(best)
    sides = (i - 1, i + 1)
    if same_value(param, best, deployed):
        if not around_deployed:
            return []
        sides = (max((j for j in sides if 0 <= j < len(ordered)), key=lambda j: measured[ordered[j]]),)
    out: list[Scalar] = []
    for j in sides:
        if 0 <= j < len(ordered):
            a, b = float(best), float(ordered[j])
            mid = math.sqrt(a * b) if param.log and a > 0 and b > 0 else (a + b) / 2.0
            value = _cast(param, mid)
            if value not in measured and not same_value(param, value, deployed) and value not in out:
                out.append(value)
    return out


def config_of_settings(space: Space, settings: Mapping[str, Scalar], *, kind: str, profile: str) -> TrialConfig:
    """A configuration that sets ``settings`` (param name -> value) on top of the deployed job."""
    parts: dict[str, list[tuple[str, Scalar]]] = {"xla": [], "libtpu": [], "env": [], "args": []}
    for p in space.params:
        if p.name in settings:
            parts[_TARGET_PART[p.target]].append((p.key, settings[p.name]))
    for name, value in settings.items():  # a catalog profile's own settings (``target:key``), e.g. around its recipe
        part, sep, key = name.partition(":")
        if sep and part in parts and not any(p.name == name for p in space.params):
            parts[part].append((key, value))
    return TrialConfig(kind=kind, profile=profile, xla=tuple(parts["xla"]), libtpu=tuple(parts["libtpu"]),
                       env=tuple(parts["env"]), args=tuple(parts["args"]),
                       params=tuple(sorted((k, v) for k, v in settings.items() if ":" not in k)))


def changed_settings(space: Space, params: Mapping[str, Scalar], deployed: Mapping[str, str | None]) -> dict[str, Scalar]:
    """The sampled ``params`` without those equal to the deployed value: what the run really changes."""
    return {p.name: params[p.name] for p in space.params
            if p.name in params and not same_value(p, params[p.name], deployed.get(p.name))}


def settings_of_record(space: Space, settings: Mapping[str, Mapping[str, Any]]) -> dict[str, Scalar]:
    """A trial record's ``settings`` (``{"xla": {...}, "env": {...}, ...}``) as param name -> value.

    Settings no param declares (a catalog profile's extra flags) are keyed ``target:key``.
    """
    by_key = {(_TARGET_PART[p.target], p.key): p.name for p in space.params}
    out: dict[str, Scalar] = {}
    for part, values in settings.items():
        for key, value in (values or {}).items():
            out[by_key.get((part, key), f"{part}:{key}")] = value
    return out


def is_own_setting(name: str) -> bool:
    """Whether ``name`` is a catalog profile's own setting (``target:key``, :func:`settings_of_record`), not a param.

    Example:
        >>> is_own_setting("xla:xla_gpu_enable_triton_gemm"), is_own_setting("overlap")
        (True, False)
    """
    return ":" in name


def flag_of(space: Space, name: str) -> str:
    """The flag (or variable) a setting sets: a param's key, or the key of a profile's own ``target:key``, without
    its leading dashes (as XLA names an unknown flag)."""
    _, sep, key = name.partition(":")
    return key.lstrip("-") if sep else str(space.param(name).key).lstrip("-")


def probe_label(param: Param, value: Scalar) -> str:
    return setting_label(param.name, value)


def setting_label(name: str, value: Scalar) -> str:
    """A setting as labels show it: a param's name or a profile's own ``target:key``, and its value.

    Example:
        >>> setting_label("xla:xla_gpu_enable_triton_gemm", False)
        'xla:xla_gpu_enable_triton_gemm=false'
    """
    return f"{name}={render_value(value)}"


__all__ = [
    "changed_settings",
    "config_of_settings",
    "deployed_values",
    "every_configuration",
    "is_own_setting",
    "probe_label",
    "probe_values",
    "refine_values",
    "same_value",
    "setting_label",
    "settings_of_record",
]
