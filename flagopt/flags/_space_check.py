"""The pre-flight of a whole space: every flag value the space can produce, tried against the installed XLA.

The deployed baseline, baseline-no-env, every profile, and the params' values are rendered to ``XLA_FLAGS`` token
sets (set k holds the k-th value of every param, so the number of XLA starts is the longest choice list, not the
product of all of them) and checked by :func:`flagopt.flags.preflight` before any job is submitted.

Example:
    >>> from flagopt.space import load_space
    >>> result = check_space(load_space("search_spaces/demo.yaml"))  # doctest: +SKIP
    >>> require_baselines_start(load_space("search_spaces/demo.yaml"), result)  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from flagopt.errors import SpaceError
from flagopt.flags._preflight import PreflightReport, preflight
from flagopt.flags._registry import FlagRegistry
from flagopt.render import PYTHON_PLACEHOLDER, baseline_configs, render, trial_interpreter
from flagopt.space import Param, Space, TrialConfig


@dataclass(frozen=True)
class SpacePreflight:
    report: PreflightReport
    labels: dict[tuple[str, ...], str]
    rejected: dict[str, str] = field(default_factory=dict)  # token -> what to do about it
    note: str = ""  # set when the XLA checked may not be the one the trial loads

    def rejected_in(self, label: str) -> list[str]:
        return [c.flag for s in self.report.sets if not s.ok and self.labels.get(s.flags) == label for c in s.problems]


def _param_values(p: Param) -> list[object]:
    if p.choices is not None:
        return list(p.choices)
    low, high = p.low, p.high
    return [int(low), int(high)] if p.type == "int" else [low, high]


def flag_sets(space: Space) -> dict[tuple[str, ...], str]:
    """Rendered XLA_FLAGS token sets to check, each with a label for the report."""
    default_of = FlagRegistry.load().default
    sets: dict[tuple[str, ...], str] = {}
    for config in (*baseline_configs(space), *space.profiles):
        tokens = tuple(render(space, config, inherited={}, default_of=default_of).xla_flags.split())
        sets.setdefault(tokens, config.profile)
    xla_params = [p for p in space.params if p.target == "xla"]
    for k in range(max((len(_param_values(p)) for p in xla_params), default=0)):
        chosen = [(p.key, _param_values(p)[k]) for p in xla_params if k < len(_param_values(p))]
        tokens = tuple(render(space, TrialConfig("sampled", "sampled", xla=tuple(chosen)), inherited={}).xla_flags.split())
        sets.setdefault(tokens, f"params (value set {k + 1})")
    return sets


def check_space(space: Space) -> SpacePreflight:
    """Check the space's flag sets against the XLA of the trial's interpreter, else against flagopt's own.

    "The installed XLA" is the one the trial loads: when the command starts a Python interpreter (``{python}``,
    ``python3``, ``.venv-maxtext/bin/python``), that interpreter is asked. When it starts something else, or that
    interpreter cannot start jax, flagopt's own jax is checked instead and ``note`` says so, with both versions.
    """
    labels = flag_sets(space)
    trial_python = trial_interpreter(space)
    if trial_python is None:
        why = f"the command starts {space.command[0]!r}, not a Python interpreter flagopt can ask for its jax"
    else:
        report = preflight(list(labels), python=trial_python)
        if report.status != "skipped" or trial_python == sys.executable:
            first = space.command[0]
            remote = space.executor.kind == "slurm" and "/" not in first and first != PYTHON_PLACEHOLDER
            return _result(report, labels, f"pre-flight: {first} as found on this host's PATH; a Slurm node may "
                           "start another interpreter with another jax" if remote else "")
        why = f"the trial's interpreter cannot start jax ({report.reason.removeprefix('jax does not start in ')})"
    report = preflight(list(labels))
    if report.status == "skipped":
        return _result(report, labels, f"pre-flight: {why}")
    return _result(report, labels, f"pre-flight: {why}; checked flagopt's own jax {report.jax_version} / jaxlib "
                   f"{report.jaxlib_version} ({sys.executable}) instead, which may not be the XLA the trial loads")


def _result(report: PreflightReport, labels: dict[tuple[str, ...], str], note: str = "") -> SpacePreflight:
    rejected = {c.flag: c.message for c in report.problems} if report.status == "failed" else {}
    return SpacePreflight(report, labels, rejected, note)


def unchecked_libtpu(space: Space) -> bool:
    """Whether the space sets ``LIBTPU_INIT_ARGS`` flags, which the pre-flight cannot check off a TPU host."""
    return any(p.target == "libtpu" for p in space.params) or bool(space.baseline.libtpu_flags)


def require_baselines_start(space: Space, result: SpacePreflight) -> None:
    """Raise when a baseline itself cannot start (no trial could be scored)."""
    for label in ("baseline-deployed", "baseline-no-env"):
        bad = result.rejected_in(label)
        if bad:
            raise SpaceError(str(space.source), "baseline",
                             f"{label} cannot start: the installed XLA rejects {', '.join(bad)} "
                             f"({result.rejected[bad[0]]}); fix the deployed flags or baseline.defaults")
