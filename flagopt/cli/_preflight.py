"""Print the pre-flight shared by ``validate --preflight`` and ``run`` (the check itself: ``flagopt.flags``)."""

from __future__ import annotations

from rich.console import Console

from flagopt.flags import SpacePreflight, check_space, require_baselines_start, unchecked_libtpu
from flagopt.space import Space


def run_preflight(space: Space, out: Console, *, before_run: bool = False) -> SpacePreflight:
    """Print the pre-flight; raise when the baseline itself cannot start (no trial could be scored)."""
    result = check_space(space)
    out.print(result.report.summary())
    if unchecked_libtpu(space):
        out.print("pre-flight: LIBTPU_INIT_ARGS flags are not checked (libtpu only parses them on a TPU host)")
    require_baselines_start(space, result)
    if result.rejected and before_run:
        out.print("these values are excluded from the study (profiles using them are recorded as invalid, "
                  "the sampler never proposes them): " + ", ".join(sorted(result.rejected)))
    return result
