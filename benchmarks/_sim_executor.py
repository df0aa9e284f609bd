"""An in-process executor for ``python -m flagopt.workloads.sim``: a whole flagopt study in seconds.

:class:`SimExecutor` is a :class:`flagopt.executors.BaseExecutor` that does what the subprocess would, without
starting one: it reads the launch's ``XLA_FLAGS`` (last-wins), the landscape's environment variables and the
``key=value`` workload arguments, evaluates the landscape at its own launch counter (drift, noise, OOM regions,
unknown flags, flaky infrastructure), writes the same text the process prints to ``<trial_dir>/rank0.log`` and
returns a job that is already done. The driver's real log parser and failure classifier then read that log. A
launch that hangs is reported as ``run_trial``'s hang watchdog reports it (``killed_by="hang"``, SIGTERM).
``run_seconds`` and ``faults`` keep each launch's simulated duration (a hang includes the watchdog's wait) and
infrastructure or setting failure, for the benchmark's run-seconds.

Time is virtual and every launch occupies its slot for ``period_s``: with one slot, launch ``i`` starts at
``epoch + i * period_s``, so drift correction sees a clock that moves with the launches, as on a cluster. With
several ``slots`` (node groups) each runs one job at a time on its own timeline; a job is done once the virtual
clock reaches its end, and the clock moves to the next end when the driver polls a job that is still running, so
the driver sees jobs finish in the order they would on a cluster. ``wall_seconds`` is the virtual time used. Each
slot may have its own speed factor (``slot_speed``, via the sim job's ``FLAGOPT_SIM_NODE_SPEED``) and its own
place on the drift curve (``slot_phase``, in launches).

Example:
    >>> from flagopt.executors import TrialLaunch
    >>> ex = SimExecutor(Path("/tmp/sim-doc"))
    >>> job = ex.submit(TrialLaunch(("python", "-m", "flagopt.workloads.sim", "landscape=win10", "seed=1"),
    ...                             {"NCCL_ALGO": "Tree"}, ".", "/tmp/sim-doc/t0"))
    >>> job.result().rank0.exit_code
    0
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flagopt.executors import (BaseExecutor, JobResult, JobStatus, RunOutcome, TrialJob, TrialLaunch, log_path_for,
                               stopped_from_outside)
from flagopt.executors._launch import child_environment
from flagopt.workloads import _emit
from flagopt.workloads.sim import DEFAULT_HANG_S, parse_job_args, run_job

#: The start of the virtual clock (a plausible unix time: records treat 0 as "no time recorded").
VIRTUAL_EPOCH = 1_700_000_000.0
_MODULE = "flagopt.workloads.sim"


@dataclass(frozen=True)
class SimRun:
    """What one simulated process did: its exit status (as ``Popen.returncode``) and its merged output.

    ``hangs``: it stopped printing and waits for the runner's hang watchdog; ``seconds``: its duration without
    that wait; ``fault``: why it failed (``oom``, ``unknown_flag`` or a flaky kind), ``None`` when it did not.
    """

    exit_code: int
    text: str
    step_seconds: tuple[float, ...] = ()
    seconds: float = 0.0
    hangs: bool = False
    fault: str | None = None


def _sim_args(argv: Sequence[str]) -> list[str]:
    """The arguments the sim module receives: everything after ``-m flagopt.workloads.sim``."""
    items = list(argv)
    if _MODULE in items:
        return items[items.index(_MODULE) + 1:]
    return [a for a in items[1:] if "=" in a]


def _popen_code(shell_code: int) -> int:
    """A shell-style status as ``Popen.returncode``: a death by signal (134, 143) is ``-signal``."""
    if shell_code in (_emit.UNKNOWN_FLAG_EXIT_CODE_OLD, _emit.SIGTERM_EXIT_CODE):
        return -(shell_code - 128)
    return shell_code


def simulate(argv: Sequence[str], env: Mapping[str, str], launch: int, *, drift_index: float | None = None) -> SimRun:
    """Run the sim job's logic in-process: the same text and exit status as ``sim.main`` in a subprocess.

    Args:
        argv: the full command (``python -m flagopt.workloads.sim landscape=... seed=... key=value ...``).
        env: the complete environment the process would see (``FLAGOPT_SIM_LANDSCAPES`` included).
        launch: the launch index when ``argv`` has no ``launch=``.
    """
    parsed = parse_job_args(_sim_args(argv))
    if isinstance(parsed, str):
        return SimRun(_emit.RUNTIME_ERROR_EXIT_CODE, parsed + "\n")
    opts, args = parsed
    index = int(opts["launch"]) if opts["launch"] else launch
    job = run_job(opts, args, env, index, drift_index=drift_index)
    text = "".join(line + "\n" for line in job.stdout) + (job.stderr + "\n" if job.stderr else "")
    return SimRun(_popen_code(job.exit_code), text, job.step_seconds, job.seconds, job.hangs, job.fault)


class SimJob(TrialJob):
    """A job whose result is known at submission and which ends when the virtual clock reaches ``ends_at``."""

    def __init__(self, job_id: str, outcome: RunOutcome, executor: SimExecutor | None = None,
                 ends_at: float = 0.0, slot: str = "") -> None:
        self.job_id = job_id
        self.slot = slot
        self._outcome = outcome
        self._executor = executor
        self.ends_at = ends_at

    def status(self) -> JobStatus:
        ex = self._executor
        if ex is not None and ex.clock < self.ends_at:
            ex.advance()
            if ex.clock < self.ends_at:
                return JobStatus(self.job_id, "RUNNING", False)
        if ex is not None:
            ex.finished(self)
        return JobStatus(self.job_id, "FINISHED", True)

    def cancel(self) -> None:
        """A job still running on the virtual clock ends now: its slot is free from this moment."""
        ex = self._executor
        if ex is not None and ex.clock < self.ends_at:
            self.ends_at = ex.clock
            ex.cancelled(self)

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

    def __init__(self, folder: Path, *, period_s: float = 60.0, base_env: Mapping[str, str] | None = None,
                 slots: Sequence[str] = ("",), slot_speed: Mapping[str, float] | None = None,
                 slot_phase: Mapping[str, float] | None = None) -> None:
        super().__init__(folder)
        self.period_s = period_s
        self.base_env = dict(os.environ if base_env is None else base_env)
        self._slots = tuple(slots)
        self.slot_speed = dict(slot_speed or {})
        self.slot_phase = dict(slot_phase or {})
        self.clock = VIRTUAL_EPOCH
        self._free_at = {slot: VIRTUAL_EPOCH for slot in self._slots}
        self._running: list[SimJob] = []
        self.slot_launches: list[str] = []  # the slot of each launch
        self.launches = 0
        self.run_seconds: list[float] = []  # simulated duration of each launch (a hang counts the watchdog's wait)
        self.faults: list[str | None] = []  # why each launch failed (None: it did not)

    @property
    def slots(self) -> tuple[str, ...]:
        return self._slots

    @property
    def wall_seconds(self) -> float:
        """Virtual time from the first launch to the end of the last."""
        return max([self.clock, *self._free_at.values()]) - VIRTUAL_EPOCH

    def advance(self) -> None:
        """Move the virtual clock to the next end of a job still running."""
        if self._running:
            self.clock = max(self.clock, min(job.ends_at for job in self._running))

    def cancelled(self, job: SimJob) -> None:
        """``job`` was stopped before its end: its slot is free now, unless a job queued behind it holds it."""
        self.finished(job)
        if not any(j.slot == job.slot for j in self._running):
            self._free_at[job.slot] = min(self._free_at.get(job.slot, self.clock), self.clock)

    def finished(self, job: SimJob) -> None:
        if job in self._running:
            self._running.remove(job)

    def submit(self, launch: TrialLaunch, slot: str = "") -> TrialJob:
        index = self.launches
        self.launches += 1
        started = max(self.clock, self._free_at.get(slot, self.clock))
        self._free_at[slot] = started + self.period_s
        env = child_environment(launch.env, self.base_env)
        if self.slot_speed:
            env["FLAGOPT_SIM_NODE"] = slot
            env["FLAGOPT_SIM_NODE_SPEED"] = ",".join(f"{s}={f}" for s, f in self.slot_speed.items())
        drift_index = (started - VIRTUAL_EPOCH) / self.period_s + self.slot_phase.get(slot, 0.0)
        run = simulate(launch.argv, env, index, drift_index=drift_index)
        self.slot_launches.append(slot)
        log_path = log_path_for(launch.trial_dir, 0)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(run.text)
        exit_code, killed_by, seconds = run.exit_code, None, run.seconds
        if run.hangs:
            # run_trial's watchdog: no new step for hang_s -> SIGTERM to the process group, which ends the job
            killed_by, exit_code = "hang", -signal.SIGTERM
            seconds += launch.hang_s if launch.hang_s is not None else DEFAULT_HANG_S
        elif stopped_from_outside(exit_code):
            killed_by = "signal"  # as run_trial reports it
        self.run_seconds.append(seconds)
        self.faults.append(run.fault)
        # Steps cannot outlast the slot: drift correction only needs the start, the planner a positive span.
        ends = list(np.cumsum(run.step_seconds)) if run.step_seconds else []
        span = min(float(ends[-1]) if ends else 1.0, 0.9 * self.period_s)
        if run.hangs:
            span = 0.9 * self.period_s
        last_step = min(float(ends[-1]), span) if ends else None
        outcome = RunOutcome(rank=0, exit_code=exit_code, killed_by=killed_by, host="sim", started_at=started,
                             ended_at=started + span, first_step_at=started + min(float(ends[0]), span) if ends else None,
                             last_step_at=started + last_step if last_step is not None else None,
                             log_path=str(log_path))
        job = SimJob(f"sim-{index}", outcome, self, started + self.period_s, slot)
        self._running.append(job)
        return job

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "nodelist": None}
