"""The embedded default: one trial at a time on this machine through submitit's LocalExecutor."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import submitit

from flagopt.executors._base import BaseExecutor, JobResult, JobStatus, TrialJob
from flagopt.executors._launch import TrialLaunch, run_trial

# submitit's LocalExecutor hides every GPU unless told how many to expose; the trial must see what the driver sees.
_GPU_VARS = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


class LocalTrialJob(TrialJob):
    def __init__(self, job: submitit.local.local.LocalJob) -> None:
        self._job = job
        self.job_id = str(job.job_id)

    def status(self) -> JobStatus:
        state = self._job.state
        done = state != "RUNNING"
        return JobStatus(self.job_id, "RUNNING" if not done else "FINISHED", done, detail=state)

    def cancel(self) -> None:
        _stop_controller(self.job_id)

    def result(self, timeout_s: float | None = None) -> JobResult:
        deadline = None if timeout_s is None else time.time() + timeout_s
        while not self._job.done():
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"local job {self.job_id} still running after {timeout_s} s")
            time.sleep(0.2)
        try:
            outcomes = tuple(self._job.results())
        except Exception as exc:  # submitit raises FailedJobError / UncompletedJobError with the job's stderr
            return JobResult(self.job_id, "FAILED", (), error=str(exc))
        return JobResult(self.job_id, "FINISHED", outcomes)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited: its result pickle is what counts.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _stop_controller(job_id: str) -> None:
    """Cancel a local job: SIGTERM to submitit's controller, which passes it to the task, where ``run_trial`` stops
    the trial and still reports it. (submitit's own cancel sends SIGINT, which the controller answers with a
    ``KeyboardInterrupt`` traceback on the user's terminal and a SIGKILL of the task a second later.)"""
    if job_id.isdigit() and _pid_alive(int(job_id)):
        try:
            os.kill(int(job_id), signal.SIGTERM)
        except ProcessLookupError:
            pass


@contextlib.contextmanager
def _terminal_interrupts_ignored() -> Iterator[None]:
    """Start submitit's controller with SIGINT ignored: a Ctrl-C in the terminal reaches the whole foreground process
    group, and the controller would print a ``KeyboardInterrupt`` traceback; the driver cancels its jobs itself."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal dispositions can only be changed from the main thread
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class AttachedLocalJob(TrialJob):
    """A local job started by an earlier driver: its controller pid and result pickle are all we have."""

    def __init__(self, folder: Path, job_id: str) -> None:
        self.job_id = job_id
        self._job = submitit.local.local.LocalJob(folder=folder, job_id=job_id, tasks=[0])

    def _finished(self) -> bool:
        return self._job.paths.result_pickle.exists()

    def status(self) -> JobStatus:
        if self._finished():
            return JobStatus(self.job_id, "FINISHED", True)
        if self.job_id.isdigit() and _pid_alive(int(self.job_id)):
            return JobStatus(self.job_id, "RUNNING", False)
        return JobStatus(self.job_id, "UNKNOWN", True, detail="controller gone and no result")

    def cancel(self) -> None:
        _stop_controller(self.job_id)

    def result(self, timeout_s: float | None = None) -> JobResult:
        deadline = None if timeout_s is None else time.time() + timeout_s
        while not self.status().done:
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"local job {self.job_id} still running after {timeout_s} s")
            time.sleep(0.2)
        if not self._finished():
            return JobResult(self.job_id, "LOST", (), error="the job's controller exited without a result "
                                                            "(killed with the machine?)")
        try:
            return JobResult(self.job_id, "FINISHED", tuple(self._job.results()))
        except Exception as exc:
            return JobResult(self.job_id, "FAILED", (), error=str(exc))


class LocalExecutor(BaseExecutor):
    kind = "local"

    def __init__(self, folder: Path, *, timeout_min: float = 60.0) -> None:
        super().__init__(folder)
        # One flat folder, not submitit's usual folder per job (``%j``): that one is created by this process only after
        # the controller started, and the controller opens its log there at once. On a loaded machine it lost the
        # race (FileNotFoundError) and the trial never ran (seen in CI); this folder exists before any job starts.
        self._executor = submitit.LocalExecutor(folder=str(self.folder))
        # The runner enforces the trial's own timeout; submitit's is a backstop a little later.
        self._executor.update_parameters(timeout_min=max(1, int(timeout_min) + 2))

    def submit(self, launch: TrialLaunch, slot: str = "") -> TrialJob:
        env = dict(launch.env)
        for name in _GPU_VARS:
            env.setdefault(name, os.environ.get(name))
        launch = TrialLaunch(**{**launch.__dict__, "env": env})
        with _terminal_interrupts_ignored():
            return LocalTrialJob(self._executor.submit(run_trial, launch))

    def attach(self, job_id: str, launch: TrialLaunch) -> TrialJob | None:
        folder = self.job_folder(job_id)
        return AttachedLocalJob(folder, job_id) if folder is not None else None

    def job_folder(self, job_id: str) -> Path | None:
        """Where submitit keeps job ``job_id``'s files: the flat folder, or ``<folder>/<job_id>/`` for a study started
        before it; ``None`` when neither has them."""
        if (self.folder / job_id).is_dir():
            return self.folder / job_id
        return self.folder if (self.folder / f"{job_id}_submitted.pkl").exists() else None
