"""What a run changes on top of the deployed environment: flags to append, variables to set or unset, arguments.

The patch is the difference between the run's recorded environment and the baseline-deployed run's, so
sourcing it where the deployed environment is set reproduces the run's environment exactly. When no baseline
environment was recorded (or the inherited flags changed in between) it falls back to the run's ``settings``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from flagopt.errors import FlagoptError
from flagopt.render import flag_token
from flagopt.space import FLAG_VARIABLES, render_value
from flagopt.study import RunRecord

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Patch:
    """``flags``: variable -> tokens to append; ``env``: variable -> value (``None`` = unset); ``args``: ``k=v``."""

    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    env: dict[str, str | None] = field(default_factory=dict)
    args: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not any(self.flags.values()) and not self.env and not self.args


def _settings_tokens(settings: dict[str, Any], target: str) -> list[str]:
    return [flag_token(k, v) for k, v in (settings.get(target) or {}).items()]


def patch_of(run: RunRecord, baseline: RunRecord | None, source: str = "export") -> Patch:
    """The patch that turns ``baseline``'s recorded environment into ``run``'s.

    Example:
        >>> base = RunRecord(0, "baseline-deployed", "baseline-deployed", "k0", "ok", 1.0, 0.0, 0.0,
        ...                  attrs={"env": {"XLA_FLAGS": "--xla_a=1", "NCCL_PROTO": "Simple"}})
        >>> run = RunRecord(1, "profile", "p", "k1", "ok", 1.1, 1.0, 0.1, attrs={"settings": {"args": {"mb": 8}},
        ...                 "env": {"XLA_FLAGS": "--xla_a=1 --xla_b=2", "NCCL_PROTO": "LL", "NCCL_ALGO": None}})
        >>> patch_of(run, base)
        Patch(flags={'XLA_FLAGS': ('--xla_b=2',)}, env={'NCCL_PROTO': 'LL', 'NCCL_ALGO': None}, args=('mb=8',))
    """
    settings = run.attrs.get("settings") or {}
    run_env: dict[str, str | None] = run.attrs.get("env") or {}
    base_env: dict[str, str | None] | None = baseline.attrs.get("env") if baseline is not None else None
    flags: dict[str, tuple[str, ...]] = {}
    env: dict[str, str | None] = {}
    for target, variable in FLAG_VARIABLES.items():
        tokens = (run_env.get(variable) or "").split()
        base = (base_env.get(variable) or "").split() if base_env is not None else None
        if base is not None and variable in run_env and tokens[: len(base)] == base:
            appended = tokens[len(base):]
        else:
            appended = _settings_tokens(settings, target)
        if appended:
            flags[variable] = tuple(appended)
    if base_env is not None and run_env:
        for name, value in run_env.items():
            if name not in FLAG_VARIABLES.values() and (name not in base_env or base_env[name] != value):
                env[name] = value
    else:
        env = {k: None if v is None else render_value(v) for k, v in (settings.get("env") or {}).items()}
    for name in env:
        if not ENV_NAME.match(name):
            raise FlagoptError(source, f"env.{name}", "is not a valid environment variable name; cannot export it")
    args = tuple(f"{k}={render_value(v)}" for k, v in (settings.get("args") or {}).items())
    return Patch(flags=flags, env=env, args=args)


def baseline_for(run: RunRecord, records: tuple[RunRecord, ...] | list[RunRecord]) -> RunRecord | None:
    """The baseline-deployed run the patch is computed against: the last one before ``run`` with an environment."""
    with_env = [r for r in records if r.is_baseline and r.attrs.get("env") is not None]
    before = [r for r in with_env if r.number <= run.number]
    return (before or with_env or [None])[-1]
