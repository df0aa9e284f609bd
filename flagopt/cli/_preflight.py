"""The pre-flight flag check shared by ``validate --preflight`` and ``run``.

Every flag value the space can produce is tried against the installed XLA before any job is submitted: the
deployed baseline, baseline-no-env, every profile, and the params' values (set k holds the k-th value of every
param, so the number of XLA starts is the longest choice list, not the product of all of them).

"The installed XLA" is the one the trial loads: when the command starts a Python interpreter (``{python}``,
``python3``, ``.venv-maxtext/bin/python``), that interpreter is asked. When it starts something else, or that
interpreter cannot start jax, flagopt's own jax is checked instead and the output says so, with both versions.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from rich.console import Console

from flagopt.errors import SpaceError
from flagopt.flags import FlagRegistry, PreflightReport, preflight
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
    """Check the space's flag sets against the XLA of the trial's interpreter, else against flagopt's own."""
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


def run_preflight(space: Space, out: Console, *, before_run: bool = False) -> SpacePreflight:
    """Print the pre-flight; raise when the baseline itself cannot start (no trial could be scored)."""
    first = space.command[0]
    if space.executor.kind == "local" and "/" in first and not (space.workdir / first).exists():
        # A Slurm node may have paths this host lacks; a local trial would fail on every run.
        raise SpaceError(str(space.source), "command",
                         f"{first} does not exist (in workdir {space.workdir.resolve()}); fix the path, or create it "
                         "(search_spaces/maxtext_cpu.yaml: bash scripts/maxtext_env.sh)")
    result = check_space(space)
    if result.note:
        out.print(result.note)
    out.print(result.report.summary())
    if any(p.target == "libtpu" for p in space.params) or space.baseline.libtpu_flags:
        out.print("pre-flight: LIBTPU_INIT_ARGS flags are not checked (libtpu only parses them on a TPU host)")
    for label in ("baseline-deployed", "baseline-no-env"):
        bad = result.rejected_in(label)
        if bad:
            raise SpaceError(str(space.source), "baseline",
                             f"{label} cannot start: the installed XLA rejects {', '.join(bad)} "
                             f"({result.rejected[bad[0]]}); fix the deployed flags or baseline.defaults")
    if result.rejected and before_run:
        out.print("these values are excluded from the study (profiles using them are recorded as invalid, "
                  "the sampler never proposes them): " + ", ".join(sorted(result.rejected)))
    return result
