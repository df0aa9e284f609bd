"""What a configuration is in the space's terms: the deployed job's values, the settings a run changes against
them, the trial config that sets them, and their labels. The values the screen tries are ``_grid.py``'s.

Every configuration here carries only the settings that differ from the deployed job, so probes, the combination
and sampled points that set the same values share one arm (and the exported patch is the few flags that matter).

Example:
    >>> from flagopt.space import Param
    >>> p = Param("overlap", "xla", "xla_gpu_experimental_parallel_collective_overlap_limit", type="int", low=1, high=4)
    >>> same_value(p, 2, "2.0"), same_value(p, 3, "2")
    (True, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from flagopt.space import Param, Space, TrialConfig, render_value

Scalar = bool | int | float | str
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


def is_number(value: object) -> bool:
    """Whether ``value`` is a number (a boolean is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def deployed_number(deployed: str | None) -> float | None:
    """A deployed value (as :func:`deployed_values` renders it) as a number; ``None`` where unset or not a number.

    Example:
        >>> deployed_number("31457287"), deployed_number("Ring"), deployed_number(None)
        (31457287.0, None, None)
    """
    try:
        return float(deployed) if deployed is not None else None
    except ValueError:
        return None


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
    "deployed_number",
    "deployed_values",
    "is_number",
    "is_own_setting",
    "probe_label",
    "same_value",
    "setting_label",
    "settings_of_record",
]
