"""What a configuration changes against what runs today (the deployed env, else the image default).

A sampled trial sets every parameter of the space, most of them to the value already in effect; the report shows
only the settings that differ, so a reader sees what the configuration actually changes.

Example:
    >>> space = {"baseline": {"xla_flags": "--xla_a=true", "env": {"P": "LL"}}}
    >>> changed({"xla": {"xla_a": True, "xla_b": 4}, "env": {"P": "Simple"}}, space)
    {'xla': {'xla_b': 4}, 'libtpu': {}, 'env': {'P': 'Simple'}, 'args': {}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flagopt.study import settings_text

_SECTIONS = ("xla", "libtpu", "env", "args")


def _norm(value: Any) -> str:
    """One spelling per value: ``True``, ``"true"`` and ``"True"`` compare equal, as XLA and bash read them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    return text.lower() if text.lower() in ("true", "false") else text


def _flag_values(flags: Any) -> dict[str, str]:
    tokens = flags.split() if isinstance(flags, str) else [str(t) for t in (flags or [])]
    out = {}
    for token in tokens:
        name, sep, value = token.lstrip("-").partition("=")
        if sep:
            out[name] = _norm(value)
    return out


def in_effect(space: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Per section, the value each setting has in the deployed job (deployed value, else declared image default)."""
    base = space.get("baseline") or {}
    defaults = {str(k): _norm(v) for k, v in (base.get("defaults") or {}).items()}
    libtpu = base.get("libtpu_flags") or base.get("libtpu_init_args") or ""
    deployed = {
        "xla": _flag_values(base.get("xla_flags") or ""),
        "libtpu": _flag_values(libtpu),
        "env": {str(k): _norm(v) for k, v in (base.get("env") or {}).items()},
        "args": {str(k): _norm(v) for k, v in (base.get("args") or {}).items()},
    }
    # a declared image default applies to every section where nothing is deployed for that name
    return {sec: {**defaults, **values} for sec, values in deployed.items()}


def changed(settings: dict[str, Any] | None, space: dict[str, Any],
            default_of: Callable[[str], Any] | None = None) -> dict[str, dict[str, Any]]:
    """``settings`` without the entries equal to the value already in effect (see :func:`in_effect`).

    ``default_of`` gives XLA's own default of a flag the space neither deploys nor declares (the flag registry): a
    probe of ``--xla_cpu_multi_thread_eigen=true`` changes nothing where that is XLA's default.

    Example:
        >>> changed({"xla": {"xla_a": True}}, {}, default_of={"xla_a": "true"}.get)["xla"]
        {}
    """
    current = in_effect(space)
    settings = settings or {}

    def now(sec: str, key: str) -> str | None:
        if key in current[sec] or default_of is None or sec not in ("xla", "libtpu"):
            return current[sec].get(key)
        default = default_of(key)
        return None if default is None else _norm(default)

    return {sec: {k: v for k, v in (settings.get(sec) or {}).items() if now(sec, str(k)) != _norm(v)}
            for sec in _SECTIONS}


def changed_text(settings: dict[str, Any] | None, space: dict[str, Any]) -> str:
    """:func:`flagopt.study.settings_text` of :func:`changed`; ``(same as deployed)`` when nothing differs."""
    if not settings or not any(settings.get(sec) for sec in _SECTIONS):
        return ""
    return settings_text(changed(settings, space)) or "(same as deployed)"
