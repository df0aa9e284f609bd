"""An in-process executor for ``python -m flagopt.workloads.sim``: a whole flagopt study in seconds.

:class:`SimExecutor` is a :class:`flagopt.executors.BaseExecutor` that does what the subprocess would, without
starting one: it reads the launch's ``XLA_FLAGS`` (last-wins), the landscape's environment variables and the
``key=value`` workload arguments, evaluates the landscape at its own launch counter (drift, noise, OOM regions,
unknown flags), writes the same text the process prints to ``<trial_dir>/rank0.log`` and returns a job that is
already done. The driver's real log parser and failure classifier then read that log.

Time is virtual: launch ``i`` starts at ``epoch + i * period_s`` and lasts as long as its simulated steps, so
drift correction sees a clock that moves with the launches, as on a cluster.

Example:
    >>> from flagopt.executors import TrialLaunch
    >>> ex = SimExecutor(Path("/tmp/sim-doc"))
    >>> job = ex.submit(TrialLaunch(("python", "-m", "flagopt.workloads.sim", "landscape=win10", "seed=1"),
    ...                             {"NCCL_ALGO": "Tree"}, ".", "/tmp/sim-doc/t0"))
    >>> job.result().rank0.exit_code
    0
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flagopt.executors import BaseExecutor, JobResult, JobStatus, RunOutcome, TrialJob, TrialLaunch, log_path_for
from flagopt.executors._launch import child_environment
from flagopt.workloads import _emit
from flagopt.workloads.sim import _RESERVED, SimulatedFailure, load_landscape, parse_xla_flags

#: The start of the virtual clock (a plausible unix time: records treat 0 as "no time recorded").
VIRTUAL_EPOCH = 1_700_000_000.0
_MODULE = "flagopt.workloads.sim"


@dataclass(frozen=True)
class SimRun:
    """What one simulated process did: its exit status (as ``Popen.returncode``) and its merged output."""

    exit_code: int
    text: str
    step_seconds: tuple[float, ...] = ()


def _sim_args(argv: Sequence[str]) -> list[str]:
    """The arguments the sim module receives: everything after ``-m flagopt.workloads.sim``."""
    items = list(argv)
    if _MODULE in items:
        return items[items.index(_MODULE) + 1:]
    return [a for a in items[1:] if "=" in a]


def simulate(argv: Sequence[str], env: Mapping[str, str], launch: int) -> SimRun:
    """Run the sim job's logic in-process: the same text and exit status as ``sim.main`` in a subprocess.

    Args:
        argv: the full command (``python -m flagopt.workloads.sim landscape=... seed=... key=value ...``).
        env: the complete environment the process would see.
        launch: the launch index when ``argv`` has no ``launch=``.
    """
    opts, args = dict(_RESERVED), {}
    for item in _sim_args(argv):
        key, sep, value = item.partition("=")
        if not sep:
            return SimRun(_emit.RUNTIME_ERROR_EXIT_CODE, f"sim: argument {item!r} is not key=value\n")
        (opts if key in _RESERVED else args)[key] = value
    land = load_landscape(opts["landscape"])
    xla, tokens = parse_xla_flags(env.get("XLA_FLAGS", ""))
    unknown_args = sorted(k for k in args if (land.params[k].target if k in land.params else None) != "args")
    if unknown_args:
        return SimRun(_emit.RUNTIME_ERROR_EXIT_CODE,
                      f"sim: unknown workload argument(s) {unknown_args} for landscape {land.name}\n")
    env_settings = {n: env[n] for n, p in land.params.items() if p.target == "env" and n in env}
    settings = {**xla, **env_settings, **args}
    index = int(opts["launch"]) if opts["launch"] else launch
    rng = np.random.default_rng([int(opts["seed"]), index])
    try:
        land.check_flags(xla, tokens)
        values = land.sample_run(settings, index, rng, int(opts["steps"]), on_baseline=False)
    except SimulatedFailure as failure:
        code = failure.exit_code
        if code == _emit.UNKNOWN_FLAG_EXIT_CODE_OLD:
            code = -signal.SIGABRT  # the process kills itself: Popen reports the signal
        return SimRun(code, failure.text + "\n")
    per_step = land.total_weights / land.devices
    loss_rng = np.random.default_rng([int(opts["seed"]), index, 1])
    lines, seconds = [], []
    for step, tokens_per_s in enumerate(values):
        loss = 2.3 + 8.5 * math.exp(-step / 6.0) + 0.01 * float(loss_rng.standard_normal())
        seconds.append(per_step / tokens_per_s)
        lines.append(_emit.step_line(step, seconds[-1], tokens_per_s * land.tflops_per_token, tokens_per_s,
                                     land.total_weights, loss))
    return SimRun(0, "".join(line + "\n" for line in lines), tuple(seconds))


class SimJob(TrialJob):
    """A job that finished when it was submitted."""

    def __init__(self, job_id: str, outcome: RunOutcome) -> None:
        self.job_id = job_id
        self._outcome = outcome

    def status(self) -> JobStatus:
        return JobStatus(self.job_id, "FINISHED", True)

    def cancel(self) -> None:
        """Nothing to stop: the job is already over."""

    def result(self, timeout_s: float | None = None) -> JobResult:
        return JobResult(self.job_id, "FINISHED", (self._outcome,))


class SimExecutor(BaseExecutor):
    """Runs ``flagopt.workloads.sim`` launches in-process, one launch index per submit.

    Args:
        folder: the executor's folder (unused beyond the seam's contract; logs go to each trial's folder).
        period_s: virtual seconds between two launches.
        base_env: the environment a job inherits (default: this process's), as ``run_trial`` would pass on.
    """

    kind = "sim"

    def __init__(self, folder: Path, *, period_s: float = 60.0, base_env: Mapping[str, str] | None = None) -> None:
        super().__init__(folder)
        self.period_s = period_s
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.launches = 0

    def submit(self, launch: TrialLaunch) -> TrialJob:
        index = self.launches
        self.launches += 1
        env = child_environment(launch.env, self.base_env)
        run = simulate(launch.argv, env, index)
        log_path = log_path_for(launch.trial_dir, 0)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(run.text)
        started = VIRTUAL_EPOCH + index * self.period_s
        # Steps cannot outlast the slot: drift correction only needs the start, the planner a positive span.
        ends = list(np.cumsum(run.step_seconds)) if run.step_seconds else []
        span = min(float(ends[-1]) if ends else 1.0, 0.9 * self.period_s)
        outcome = RunOutcome(rank=0, exit_code=run.exit_code, killed_by=None, host="sim", started_at=started,
                             ended_at=started + span, first_step_at=started + min(float(ends[0]), span) if ends else None,
                             last_step_at=started + span if ends else None, log_path=str(log_path))
        return SimJob(f"sim-{index}", outcome)

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "nodelist": None}
