"""Turn a trial's configuration into the exact argv and environment it runs with.

XLA resolves a flag given twice last-wins, so a trial's flags are *appended* after the inherited and deployed
ones, never rebuilt from scratch: whatever the image or the job script already put in ``XLA_FLAGS`` stays, and
the trial's value wins. ``LIBTPU_INIT_ARGS`` works the same way. Env vars are set on top of the deployed env;
workload args are appended as ``key=value``.

Example:
    >>> from flagopt.space import TrialConfig
    >>> rendered = render(space, TrialConfig("profile", "p", xla=(("xla_a", True),)))  # doctest: +SKIP
    >>> rendered.env["XLA_FLAGS"]  # doctest: +SKIP
    '--xla_gpu_enable_latency_hiding_scheduler=true --xla_a=true'
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flagopt.space import FLAG_VARIABLES, Space, TrialConfig, render_value

PYTHON_PLACEHOLDER = "{python}"
_TOKEN_NAME = re.compile(r"--([A-Za-z0-9_]+)")
_PYTHON_NAME = re.compile(r"python(?:\d+(?:\.\d+)*)?\Z")


@dataclass(frozen=True)
class RenderedTrial:
    """The command a trial runs and every variable it sets (``None`` = removed from the environment)."""

    argv: tuple[str, ...]
    env: dict[str, str | None]
    workdir: str
    notes: tuple[str, ...] = ()

    @property
    def xla_flags(self) -> str:
        return self.env.get("XLA_FLAGS") or ""

    @property
    def libtpu_init_args(self) -> str:
        return self.env.get("LIBTPU_INIT_ARGS") or ""


def flag_token(name: str, value: Any) -> str:
    return f"--{name}={render_value(value)}"


def token_name(token: str) -> str | None:
    match = _TOKEN_NAME.match(token)
    return match.group(1) if match else None


def render(
    space: Space,
    config: TrialConfig,
    *,
    inherited: Mapping[str, str] | None = None,
    default_of: Callable[[str], Any] | None = None,
    extra_flags: Sequence[str] = (),
) -> RenderedTrial:
    """Render ``config`` on top of ``space.baseline``.

    Args:
        space: the validated space.
        config: what the trial sets; ``kind == "baseline-no-env"`` restores everything the deployed state sets to its
            image default (appended ``--flag=default``; env vars set to their default or removed).
        inherited: the environment the job inherits (default: this process's); its ``XLA_FLAGS`` come first.
        default_of: image default of a flag when ``baseline.defaults`` has none (e.g. the flag registry).
        extra_flags: appended last (e.g. ``--xla_dump_to`` for the evidence run).
    """
    inherited = os.environ if inherited is None else inherited
    baseline = space.baseline
    defaults = dict(baseline.defaults)
    notes: list[str] = []
    restore = config.kind == "baseline-no-env"

    def restored(tokens: Sequence[str]) -> list[str]:
        out = []
        for token in tokens:
            name = token_name(token)
            if name is None:
                continue
            if name in defaults:
                out.append(flag_token(name, defaults[name]))
            elif default_of is not None and default_of(name) is not None:
                out.append(flag_token(name, default_of(name)))
            else:
                notes.append(f"no image default known for {name}: add it under baseline.defaults to restore it")
        return out

    env: dict[str, str | None] = {}
    for target, variable in FLAG_VARIABLES.items():
        deployed = list(baseline.xla_flags if target == "xla" else baseline.libtpu_flags)
        tokens = inherited.get(variable, "").split() + deployed
        if restore:
            tokens += restored(deployed)
        tokens += [flag_token(n, v) for n, v in (config.xla if target == "xla" else config.libtpu)]
        if target == "xla":
            tokens += list(extra_flags)
        if tokens:
            env[variable] = " ".join(tokens)

    for name, value in baseline.env:
        if restore:
            env[name] = render_value(defaults[name]) if name in defaults else None
        else:
            env[name] = value
    for name, value in config.env:
        env[name] = None if value is None else render_value(value)

    args = dict(baseline.args)
    args.update(dict(config.args))
    argv = [sys.executable if a == PYTHON_PLACEHOLDER else a for a in space.command]
    argv += [f"{k}={render_value(v)}" for k, v in args.items()]
    return RenderedTrial(argv=tuple(argv), env=env, workdir=str(space.workdir.resolve()), notes=tuple(notes))


def baseline_configs(space: Space) -> tuple[TrialConfig, TrialConfig]:
    """The two reference points every study starts with."""
    return (TrialConfig(kind="baseline-deployed", profile="baseline-deployed"),
            TrialConfig(kind="baseline-no-env", profile="baseline-no-env"))


def config_from_params(space: Space, params: Mapping[str, Any]) -> TrialConfig:
    """The configuration behind a set of sampled Optuna params."""
    sets: dict[str, list[tuple[str, Any]]] = {"xla": [], "libtpu": [], "env": [], "arg": []}
    for p in space.params:
        if p.name in params:
            sets[p.target].append((p.key, params[p.name]))
    return TrialConfig(kind="sampled", profile="sampled", xla=tuple(sets["xla"]), libtpu=tuple(sets["libtpu"]),
                       env=tuple(sets["env"]), args=tuple(sets["arg"]), params=tuple(sorted(params.items())))


def trial_interpreter(space: Space) -> str | None:
    """The Python interpreter a trial's command starts, as a path; ``None`` when the command starts something else.

    ``{python}`` is flagopt's own interpreter. A first word named ``python``, ``python3`` or ``python3.12`` is the
    interpreter itself: a path with a ``/`` is taken relative to ``workdir`` (where the command runs, as
    :class:`subprocess.Popen` does with ``cwd``), a bare name is looked up on this process's ``PATH`` (which a local
    trial inherits; a Slurm node may resolve it differently). Any other program (``bash``, ``srun``, a launcher) is
    not asked anything: starting an unknown program with ``-c`` could do anything.

    Example:
        >>> trial_interpreter(load_space("search_spaces/maxtext_cpu.yaml"))  # doctest: +SKIP
        '/path/to/flagopt/.venv-maxtext/bin/python'
    """
    first = space.command[0]
    if first == PYTHON_PLACEHOLDER:
        return sys.executable
    if not _PYTHON_NAME.match(os.path.basename(first)):
        return None
    if "/" in first:
        return str(space.workdir.resolve() / first) if not os.path.isabs(first) else first
    return shutil.which(first) or first
