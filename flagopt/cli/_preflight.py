"""Print the pre-flight shared by ``validate --preflight`` and ``run`` (the check itself: ``flagopt.flags``)."""

from __future__ import annotations

from rich.console import Console

from flagopt.errors import SpaceError
from flagopt.flags import SpacePreflight, check_space, require_baselines_start, unchecked_libtpu
from flagopt.space import Space


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
    if unchecked_libtpu(space):
        out.print("pre-flight: LIBTPU_INIT_ARGS flags are not checked (libtpu only parses them on a TPU host)")
    require_baselines_start(space, result)
    if result.rejected and before_run:
        out.print("these values are excluded from the study (profiles using them are recorded as invalid, "
                  "the sampler never proposes them): " + ", ".join(sorted(result.rejected)))
    return result
