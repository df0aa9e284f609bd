"""The ``slurm-steps`` backend: each trial is one job step (``srun``) inside an allocation the user already holds.

Many clusters hand out allocations (``salloc -N 2 ...``) and expect sweeps to run as steps inside them rather than
as new ``sbatch`` jobs. Start flagopt in the allocation's shell; each trial is then ``srun --jobid=$SLURM_JOB_ID
--nodes N --ntasks-per-node T [--nodelist SLOT] python -m flagopt.executors._steps WORK``, and every task runs
:func:`flagopt.executors.run_trial` as it would in an sbatch job. No queue sits between two trials: the nodes are
the allocation's until it ends.

The driver watches the ``srun`` through submitit's LocalExecutor (a local controller per trial, like the ``local``
backend), so cancel, timeouts, ``--detach`` and re-attach work as they do locally; the tasks' outcomes come back
as pickles in a folder the nodes share (the study folder, like sbatch jobs).

Example:
    >>> from flagopt.executors import SlurmSettings
    >>> srun_argv(SlurmSettings(nodes=2, gpus_per_node=8), "123", "node[1-2]", "flagopt-7", 5, "/w")[:6]
    ['srun', '--jobid=123', '--job-name=flagopt-7', '--nodes=2', '--ntasks-per-node=1', '--nodelist=node[1-2]']
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from flagopt.errors import StudyError
from flagopt.executors._base import JobResult, TrialJob
from flagopt.executors._launch import RunOutcome, TrialLaunch
from flagopt.executors._local import AttachedLocalJob, LocalExecutor, LocalTrialJob
from flagopt.executors._slurm import SlurmSettings, slurm_task

#: the variable Slurm sets in an allocation's shell (and in a batch script)
ALLOCATION_ENV = "SLURM_JOB_ID"


def require_allocation(allocation: str | None = None) -> str:
    """The allocation trials will be steps of (``allocation``, else ``$SLURM_JOB_ID``), with ``srun`` to start them.

    Raises:
        StudyError: not inside an allocation, or no ``srun`` on the PATH.
    """
    allocation = allocation or os.environ.get(ALLOCATION_ENV, "")
    if not allocation:
        raise StudyError("executor", "slurm-steps", f"no Slurm allocation: ${ALLOCATION_ENV} is not set. Start "
                         "flagopt inside one (salloc -N 2 --time 4:00:00, then python -m flagopt run ... in its "
                         "shell), or use executor kind slurm (one sbatch job per trial)")
    if shutil.which("srun") is None:
        raise StudyError("executor", "slurm-steps", "srun is not on the PATH: run flagopt on a node of the "
                                                    "allocation (the shell salloc opened)")
    return allocation


def srun_argv(settings: SlurmSettings, allocation: str, slot: str, name: str, time_min: int, work: str) -> list[str]:
    """The ``srun`` that runs one trial's tasks as a step of ``allocation`` (never through a shell)."""
    argv = ["srun", f"--jobid={allocation}", f"--job-name={name}", f"--nodes={settings.nodes}",
            f"--ntasks-per-node={settings.tasks_per_node}"]
    nodelist = slot or settings.nodelist
    if nodelist:
        argv.append(f"--nodelist={nodelist}")
    if settings.gpus_per_node:
        argv.append(f"--gpus-per-node={settings.gpus_per_node}")
    if settings.cpus_per_task:
        argv.append(f"--cpus-per-task={settings.cpus_per_task}")
    # --time bounds the step (each task's own watchdog fires first); --kill-on-bad-exit=0 lets every task write
    # its outcome when one fails, as in an sbatch job.
    return [*argv, f"--time={time_min}", "--kill-on-bad-exit=0", sys.executable, "-m", "flagopt.executors._steps",
            work]


def run_steps(argv: list[str], work: str) -> tuple[RunOutcome, ...]:
    """Run the step (in the local controller): forward a stop to ``srun``, then collect each task's outcome."""
    folder = Path(work)
    with open(folder / "srun.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def stop(_signum: int, _frame: object) -> None:
            # srun passes SIGTERM to every task, whose run_trial stops the trial and still writes its outcome
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
            signal.signal(sig, stop)
        proc.wait()
    outcomes = []
    for path in sorted(folder.glob("outcome.*.pkl")):
        with open(path, "rb") as fh:
            outcomes.append(pickle.load(fh))
    if not outcomes:
        said = (folder / "srun.log").read_text(errors="replace").strip()
        raise RuntimeError(f"srun exited {proc.returncode} before any task ran: {said[-2000:] or 'no output'}")
    return tuple(sorted(outcomes, key=lambda o: o.rank))


def _flatten(result: JobResult) -> JobResult:
    """The controller returns every task's outcome as one value; the driver wants them one by one."""
    outcomes = tuple(o for value in result.outcomes for o in (value if isinstance(value, tuple) else (value,)))
    return JobResult(result.job_id, result.state, outcomes, result.error)


class StepsTrialJob(LocalTrialJob):
    def result(self, timeout_s: float | None = None) -> JobResult:
        return _flatten(super().result(timeout_s))


class AttachedStepsJob(AttachedLocalJob):
    def result(self, timeout_s: float | None = None) -> JobResult:
        return _flatten(super().result(timeout_s))


class SlurmStepsExecutor(LocalExecutor):
    """Trials as ``srun`` steps of the allocation flagopt runs in (``$SLURM_JOB_ID``, or ``allocation``).

    Raises:
        StudyError: not inside an allocation, or no ``srun`` on the PATH.
    """

    kind = "slurm-steps"

    def __init__(self, folder: Path, settings: SlurmSettings | None = None, *, timeout_min: float = 60.0,
                 allocation: str | None = None) -> None:
        self.settings = settings or SlurmSettings()
        self.allocation = require_allocation(allocation)
        super().__init__(folder, timeout_min=timeout_min)  # creates the jobs folder: only once the checks passed

    @property
    def slots(self) -> tuple[str, ...]:
        """Each nodelist of ``executor.slurm.slots`` (nodes of the allocation), or ``("",)``: the whole of it."""
        return tuple(n or "" for n in self.settings.slot_nodelists)

    def submit(self, launch: TrialLaunch, slot: str = "") -> TrialJob:
        name = Path(launch.trial_dir).name
        work = self.folder / "steps" / f"{name}-{uuid.uuid4().hex[:8]}"
        work.mkdir(parents=True)
        with open(work / "launch.pkl", "wb") as fh:
            pickle.dump(launch, fh)
        argv = srun_argv(self.settings, self.allocation, slot, f"flagopt-{name}",
                         self.settings.time_limit_min(launch.timeout_s), str(work))
        # no GPU variables forced here (the local backend's concern): srun gives each step its GPUs
        return StepsTrialJob(self._executor.submit(run_steps, argv, str(work)))

    def attach(self, job_id: str, launch: TrialLaunch) -> TrialJob | None:
        folder = self.job_folder(job_id)
        return AttachedStepsJob(folder, job_id) if folder is not None else None

    def describe(self) -> dict[str, object]:
        s = self.settings
        return {"kind": self.kind, "allocation": self.allocation, "nodelist": s.nodelist, "slots": list(s.slots),
                "nodes": s.nodes, "tasks_per_node": s.tasks_per_node}


def step_main(work: str) -> int:
    """What each task of the step runs: the trial, then its outcome as ``outcome.<rank>.pkl`` for the controller."""
    folder = Path(work)
    with open(folder / "launch.pkl", "rb") as fh:
        launch = pickle.load(fh)
    outcome = slurm_task(launch)
    tmp = folder / f".outcome.{outcome.rank}.{os.getpid()}"
    with open(tmp, "wb") as fh:
        pickle.dump(outcome, fh)
    tmp.rename(folder / f"outcome.{outcome.rank:05d}.pkl")  # whole or absent: the controller may read it at once
    return 0


if __name__ == "__main__":
    sys.exit(step_main(sys.argv[1]))
