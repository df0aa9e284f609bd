"""The execution seam: an Executor submits a :class:`TrialLaunch` and hands back a :class:`TrialJob`.

Backends (one module each) wrap a submitit executor; the study driver only sees this interface, so a backend can
be added without touching the driver.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

from flagopt.executors._launch import RunOutcome, TrialLaunch


@dataclass(frozen=True)
class JobStatus:
    """What the scheduler says about a job, independent of the backend."""

    job_id: str
    state: str  # PENDING | RUNNING | FINISHED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | PREEMPTED | UNKNOWN
    done: bool
    detail: str = ""


@dataclass(frozen=True)
class JobResult:
    """A finished job: the outcome of every task (rank 0 first) or why there is none."""

    job_id: str
    state: str
    outcomes: tuple[RunOutcome, ...]
    error: str = ""  # the scheduler's or submitit's message when the job produced no outcome

    @property
    def rank0(self) -> RunOutcome | None:
        return next((o for o in self.outcomes if o.rank == 0), self.outcomes[0] if self.outcomes else None)


class TrialJob(abc.ABC):
    """A submitted trial."""

    job_id: str

    @abc.abstractmethod
    def status(self) -> JobStatus:
        """Poll the scheduler (cheap; the driver calls it about once a second)."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop the job (scancel / SIGTERM to the local controller)."""

    @abc.abstractmethod
    def result(self, timeout_s: float | None = None) -> JobResult:
        """Wait for the end and collect the per-task outcomes."""

    def queued_behind_until(self, when: float) -> None:
        """The job ahead of this one on its slot ends at ``when`` (``inf`` while it runs): pending counts from then."""

    def times(self) -> dict[str, float | None]:
        """The scheduler's submit/start/end times, where it keeps them (Slurm does; a local job has none)."""
        return {}


class BaseExecutor(abc.ABC):
    """Submits trials. ``submit`` is the one method a backend must write; ``attach`` makes resume possible."""

    kind: str = "base"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    #: Jobs one slot may hold at once: more than one when the scheduler queues the next behind the running one.
    jobs_per_slot: int = 1

    @property
    def slots(self) -> tuple[str, ...]:
        """The blocks of hardware trials run on, one job (or queue) each; ``("",)``: one, unnamed."""
        return ("",)

    @abc.abstractmethod
    def submit(self, launch: TrialLaunch, slot: str = "") -> TrialJob:
        """Start ``launch`` on ``slot`` (one of :attr:`slots`) and return its job at once (do not wait)."""

    def attach(self, job_id: str, launch: TrialLaunch) -> TrialJob | None:
        """Re-attach to a job submitted by an earlier driver, or ``None`` when it cannot be found."""
        return None

    def slot_problem(self, slot: str) -> str | None:
        """Why ``slot`` cannot run trials any more (a node down), or ``None`` while it can."""
        return None

    def describe(self) -> dict[str, object]:
        """Recorded on the study (e.g. the pinned nodelist)."""
        return {"kind": self.kind}
