"""The Slurm backend: each trial is one ``sbatch`` job through submitit; every task runs :func:`run_trial` once.

Example:
    >>> settings = SlurmSettings(nodelist="node[1-2]", nodes=2)
    >>> settings.time_limit_min(timeout_s=600.0)  # the trial's timeout plus time_margin_s, in minutes
    12
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import submitit
from submitit.core.utils import FailedJobError, UncompletedJobError

from flagopt.errors import FlagoptError, StudyError
from flagopt.executors._base import BaseExecutor, JobResult, JobStatus, TrialJob
from flagopt.executors._launch import RunOutcome, TrialLaunch, run_trial
from flagopt.executors._slurm_query import (
    DONE_STATES,
    SlurmJobInfo,
    SlurmUnavailable,
    check_pinned_nodes,
    query_job,
    run_slurm,
)
from flagopt.space import SlurmSpec

#: A trial with no timeout of its own still needs a Slurm limit: submitit would otherwise impose 5 minutes.
_NO_TIMEOUT_LIMIT_MIN = 24 * 60


@dataclass(frozen=True)
class SlurmSettings(SlurmSpec):
    """Where and how trials run on Slurm: the space's :class:`flagopt.space.SlurmSpec` plus the executor's own knobs.

    Attributes (besides the spec's ``partition``, ``account``, ``qos``, ``nodelist``, ``nodes``,
    ``tasks_per_node``, ``gpus_per_node``, ``cpus_per_task``, ``time_min``, ``exclusive``, ``additional``,
    ``pending_deadline_min``):
        pending_deadline_s: a job still PENDING this long after submission is cancelled and reported; by default
            the spec's ``pending_deadline_min``.
        time_margin_s: added to the trial's timeout for the Slurm limit; the trial's own watchdog fires first.
    """

    pending_deadline_s: float | None = None
    time_margin_s: float = 120.0

    @classmethod
    def of(cls, spec: SlurmSpec) -> SlurmSettings:
        """The settings a space's ``executor.slurm`` declares, field by field."""
        return cls(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(SlurmSpec)})

    def __post_init__(self) -> None:
        if self.pending_deadline_s is None:
            object.__setattr__(self, "pending_deadline_s", self.pending_deadline_min * 60)
        for key in ("nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "time_min"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise FlagoptError("slurm settings", key, f"must be a whole number >= 1, got {value!r}")
        if self.pending_deadline_s <= 0 or self.time_margin_s < 0:
            raise FlagoptError("slurm settings", "pending_deadline_s", "must be > 0 (and time_margin_s >= 0)")

    @property
    def num_tasks(self) -> int:
        return self.nodes * self.tasks_per_node

    def time_limit_min(self, timeout_s: float | None) -> int:
        """Slurm's limit in whole minutes (Slurm rounds seconds up to minutes anyway)."""
        if self.time_min is not None:
            return self.time_min
        if timeout_s is None:
            return _NO_TIMEOUT_LIMIT_MIN
        return max(1, math.ceil((timeout_s + self.time_margin_s) / 60))


def slurm_task(launch: TrialLaunch) -> RunOutcome:
    """What each Slurm task runs: :func:`run_trial`, plus the Slurm node name (nodes may share a hostname)."""
    outcome = run_trial(launch)
    node = os.environ.get("SLURMD_NODENAME", "")
    return dataclasses.replace(outcome, extra={**outcome.extra, "slurm_node": node}) if node else outcome


class _Job(submitit.SlurmJob):  # type: ignore[misc]
    # submitit waits this long for a result pickle after Slurm says the job ended. We only ask once Slurm reports the
    # end, and a task writes its pickle before its step ends, so the wait only covers shared-filesystem lag; the
    # default 15 s made every cancelled or killed trial cost 19 s instead of 7-8 s on the local cluster.
    _results_timeout_s = 5


class _Executor(submitit.SlurmExecutor):  # type: ignore[misc]
    job_class = _Job


class SlurmTrialJob(TrialJob):
    """One trial's Slurm job.

    ``submitted_at``, ``started_at`` and ``ended_at`` (unix seconds, Slurm's own record) and ``nodelist`` are
    filled in by :meth:`status` as Slurm learns them.
    """

    def __init__(self, job: _Job, settings: SlurmSettings, *, poll_interval_s: float = 1.0) -> None:
        self._job = job
        self._settings = settings
        self._poll_interval_s = poll_interval_s
        self._created_at = time.time()
        self._queued_until = 0.0  # until then it waited for this study's own job on the same nodes, not for Slurm
        self._last: JobStatus | None = None
        self._last_at = 0.0
        self._expired = ""
        self._ran = False
        self.job_id = str(job.job_id)
        self.nodelist = ""
        self.submitted_at: float | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None

    def times(self) -> dict[str, float | None]:
        """The Slurm times the trial record stores."""
        return {"submitted_at": self.submitted_at, "started_at": self.started_at, "ended_at": self.ended_at}

    def status(self) -> JobStatus:
        """One ``squeue`` (``sacct`` once the job ended) at most every ``poll_interval_s``; final states are kept."""
        if self._last is not None and (self._last.done or time.time() - self._last_at < self._poll_interval_s):
            return self._last
        try:
            info = query_job(self.job_id)
        except SlurmUnavailable as exc:
            return JobStatus(self.job_id, "UNKNOWN", False, str(exc))  # transient: ask again next time
        if info is None:
            return JobStatus(self.job_id, "UNKNOWN", False, "Slurm does not know this job (yet)")
        self._record(info)
        reason = "" if info.reason in ("", "None") else info.reason
        status = JobStatus(self.job_id, info.state, info.state in DONE_STATES, reason)
        if status.state == "PENDING" and self._pending_for() > self._settings.pending_deadline_s:
            self._expired = (
                f"job {self.job_id} did not start within pending_deadline_s={self._settings.pending_deadline_s:g} s"
                f" (Slurm reason: {reason or 'none given'}); cancelled it"
            )
            self.cancel()
        if self._expired:
            # the job never ran, so there is nothing to wait for once scancel is sent
            status = JobStatus(self.job_id, "CANCELLED", True, self._expired)
        self._last, self._last_at = status, time.time()
        return status

    def cancel(self) -> None:
        try:
            run_slurm(["scancel", self.job_id])
        except SlurmUnavailable:
            pass  # nothing else can stop it; the next status() says why

    def result(self, timeout_s: float | None = None) -> JobResult:
        """Wait for Slurm to report the end, then collect every task's outcome (rank 0 first)."""
        deadline = None if timeout_s is None else time.time() + timeout_s
        status = self.status()
        while not status.done:
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"Slurm job {self.job_id} still {status.state} after {timeout_s} s")
            time.sleep(self._poll_interval_s)
            status = self.status()
        if not self._ran:
            # never got nodes (cancelled while pending): no task can have written a result
            error = status.detail or f"job ended {status.state} before it started"
            return JobResult(self.job_id, status.state, (), error=error)
        outcomes: list[RunOutcome] = []
        errors: list[str] = []
        for task_id in range(self._job.num_tasks):
            task = self._job.task(task_id)
            try:
                # the internal reader of the result pickle: the public result() would wait on submitit's own poller
                kind, value = task._get_outcome_and_result()
            except UncompletedJobError as exc:  # ended without a result: its stderr tells why
                errors.append(str(exc))
                continue
            if kind == "success":
                outcomes.append(value)
            else:
                errors.append(f"task {task_id} raised in the job:\n{value}")
        outcomes.sort(key=lambda o: o.rank)
        return JobResult(self.job_id, status.state, tuple(outcomes), error="\n".join(errors))

    def _record(self, info: SlurmJobInfo) -> None:
        self.submitted_at = info.submitted_at or self.submitted_at
        self.started_at = info.started_at if info.ran else self.started_at
        self.ended_at = info.ended_at or self.ended_at
        if info.ran:
            self._ran = True
            self.nodelist = info.nodelist

    def queued_behind_until(self, when: float) -> None:
        """The study's job ahead of this one on the same nodes ends at ``when`` (``inf`` while it runs).

        The driver queues the next trial behind the running one so the nodes never idle; that wait is not Slurm
        failing to start the job, and a trial longer than ``pending_deadline_s`` must not get the next one
        cancelled: the pending clock starts when the job ahead ends.
        """
        self._queued_until = when

    def _pending_for(self) -> float:
        return time.time() - max(self.submitted_at or self._created_at, self._queued_until)


class SlurmExecutor(BaseExecutor):
    """Submits each trial as one Slurm job; pinned nodes are checked with :func:`check_pinned_nodes` by the caller.

    Args:
        folder: submitit's folder (job scripts, pickles, stdout/stderr per job); must be on a filesystem the nodes
            share.
        settings: where and how the jobs run.
        poll_interval_s: the least time between two Slurm queries for one job.
    """

    kind = "slurm"
    #: The next job waits in Slurm's queue on the slot's nodes, so they never sit idle between two trials.
    jobs_per_slot = 2

    def __init__(self, folder: Path, settings: SlurmSettings | None = None, *, poll_interval_s: float = 1.0) -> None:
        super().__init__(folder)
        self.settings = settings or SlurmSettings()
        self._poll_interval_s = poll_interval_s
        try:
            self._executor = _Executor(folder=str(self.folder / "%j"))
        except RuntimeError as exc:  # submitit: 'Could not detect "srun"'
            raise StudyError("slurm", None, f"{exc}: run flagopt on a Slurm login node") from exc

    @property
    def slots(self) -> tuple[str, ...]:
        """Each pinned nodelist (``executor.slurm.slots``, or the one ``nodelist``); ``("",)`` when none is pinned."""
        return tuple(n or "" for n in self.settings.slot_nodelists)

    def slot_problem(self, slot: str) -> str | None:
        """Why a pinned slot cannot run jobs (a node DOWN, DRAINED or unknown to Slurm), or ``None``."""
        if not slot:
            return None
        try:
            check_pinned_nodes(slot)
        except StudyError as exc:
            return exc.reason
        return None

    def _parameters(self, launch: TrialLaunch, slot: str = "") -> dict[str, object]:
        s = self.settings
        return {
            "job_name": f"flagopt-{Path(launch.trial_dir).name}",
            "time": s.time_limit_min(launch.timeout_s),
            "nodes": s.nodes,
            "ntasks_per_node": s.tasks_per_node,
            "partition": s.partition,
            "nodelist": slot or s.nodelist,
            "gpus_per_node": s.gpus_per_node,
            "cpus_per_task": s.cpus_per_task,
            "account": s.account,
            "qos": s.qos,
            "exclusive": True if s.exclusive else None,
            # submitit's USR2 warning comes signal_delay_s before the limit (at once when that exceeds the limit)
            # and run_trial would end the trial on it, so Slurm would record COMPLETED instead of TIMEOUT. At the
            # limit Slurm sends SIGTERM, which run_trial turns into a clean stop with an outcome, and records
            # TIMEOUT itself; so the warning is replaced by SIGURG, which every process ignores.
            "additional_parameters": {"signal": "URG@1", **dict(s.additional)},
        }

    def submit(self, launch: TrialLaunch, slot: str = "") -> SlurmTrialJob:
        """``sbatch`` the trial on the nodes of ``slot`` and return at once.

        Raises:
            StudyError: sbatch refused the job (``Invalid node name specified``, an unknown partition or account).
        """
        self._executor.update_parameters(**self._parameters(launch, slot))
        try:
            job = self._executor.submit(slurm_task, launch)
        except FailedJobError as exc:
            raise StudyError("slurm", "sbatch", str(exc).strip()) from exc
        return SlurmTrialJob(job, self.settings, poll_interval_s=self._poll_interval_s)

    def attach(self, job_id: str, launch: TrialLaunch) -> SlurmTrialJob | None:
        """The job an earlier driver submitted into this folder, or ``None`` when this folder or Slurm lacks it."""
        job = _Job(folder=str(self.folder / "%j"), job_id=str(job_id), tasks=list(range(self.settings.num_tasks)))
        if not job.paths.submitted_pickle.exists():
            return None
        trial = SlurmTrialJob(job, self.settings, poll_interval_s=self._poll_interval_s)
        try:
            if query_job(str(job_id)) is None:
                return None
        except SlurmUnavailable:
            pass  # cannot tell now; status() keeps asking
        return trial

    def describe(self) -> dict[str, object]:
        s = self.settings
        return {
            "kind": self.kind,
            "nodelist": s.nodelist,
            "slots": list(s.slots),
            "partition": s.partition,
            "nodes": s.nodes,
            "tasks_per_node": s.tasks_per_node,
        }
