"""What runs inside a job: start the trial command, tee its log, watch it, report how it ended.

This function is pickled by submitit and executed once per task, locally or on a Slurm node. It never runs a
shell: ``argv`` goes straight to :class:`subprocess.Popen`.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: A step line of any MaxText format; the watchdog only needs to know that progress was made.
DEFAULT_PROGRESS_PATTERN = r"completed step:?\s*\d+"


@dataclass(frozen=True)
class TrialLaunch:
    """Everything a job needs to run one trial; plain data so it pickles.

    Attributes:
        argv: the command, never run through a shell.
        env: variables to set (``None`` = remove) on top of the job's inherited environment.
        workdir: the command's working directory.
        trial_dir: the folder that receives ``rank<N>.log`` and ``outcome.json``.
        timeout_s: kill the command after this long (``None``: no limit here; the scheduler may have one).
        hang_s: kill when no progress line appeared for this long after the first one.
        init_timeout_s: kill when no progress line appeared this long after the start.
        progress_pattern: regex of a progress (step) line.
    """

    argv: tuple[str, ...]
    env: dict[str, str | None]
    workdir: str
    trial_dir: str
    timeout_s: float | None = None
    hang_s: float | None = None
    init_timeout_s: float | None = None
    progress_pattern: str = DEFAULT_PROGRESS_PATTERN


@dataclass(frozen=True)
class RunOutcome:
    """How one task of a trial ended, as seen from inside the job."""

    rank: int
    exit_code: int | None
    killed_by: str | None  # "timeout" | "hang" | "init-timeout" | "signal" | None
    host: str
    started_at: float
    ended_at: float
    first_step_at: float | None
    last_step_at: float | None
    log_path: str
    extra: dict[str, str] = field(default_factory=dict)


def task_rank() -> int:
    """This task's rank inside the job (0 when not under Slurm/submitit)."""
    for name in ("SLURM_PROCID", "SUBMITIT_LOCAL_GLOBALID", "SUBMITIT_GLOBAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def log_path_for(trial_dir: str | Path, rank: int) -> Path:
    return Path(trial_dir) / f"rank{rank}.log"


def child_environment(overrides: dict[str, str | None], base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _default_interrupts() -> None:
    """Give SIGINT its default meaning back before the command starts: an ignored signal stays ignored across
    ``exec``, and the local executor starts its jobs with SIGINT ignored (the terminal's Ctrl-C is the driver's)."""
    try:
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: nothing was changed here either
        pass


def stopped_from_outside(exit_code: int | None) -> bool:
    """Whether a trial that ended with ``exit_code`` died of a SIGTERM or SIGINT (``killed_by="signal"`` when the
    runner sent none: Slurm's time limit and scancel signal every process of the step, and no configuration sends
    itself SIGTERM).

    Example:
        >>> stopped_from_outside(-15), stopped_from_outside(-9), stopped_from_outside(1)
        (True, False, False)
    """
    return exit_code in (-signal.SIGTERM, -signal.SIGINT)


def run_trial(launch: TrialLaunch) -> RunOutcome:
    """Run ``launch.argv`` to the end (or until a watchdog fires) and describe how it ended."""
    rank = task_rank()
    log_path = log_path_for(launch.trial_dir, rank)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    progress = re.compile(launch.progress_pattern)
    started_at = time.time()
    step_times: list[float] = []

    _default_interrupts()
    try:
        proc = subprocess.Popen(
            list(launch.argv),
            cwd=launch.workdir,
            env=child_environment(launch.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # so a kill reaches the whole process group, grandchildren included
        )
    except OSError as exc:
        # No process, so no log of its own: say why in the log, as a shell would, with the shell's "not found" status.
        log_path.write_text(f"{type(exc).__name__}: {exc} (flagopt could not start the command in {launch.workdir})\n")
        return RunOutcome(rank=rank, exit_code=127, killed_by=None, host=socket.gethostname(), started_at=started_at,
                          ended_at=time.time(), first_step_at=None, last_step_at=None, log_path=str(log_path))

    write_fault: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        try:
            log = open(log_path, "wb")  # noqa: SIM115 (closed below, or at the first failed write)
        except OSError as exc:
            write_fault.append(f"{exc.strerror or exc} ({log_path})")
            log = None
        for raw in iter(proc.stdout.readline, b""):
            if log is not None:
                try:
                    log.write(raw)
                    log.flush()
                except OSError as exc:
                    # a full disk or quota: the log is cut short, which says nothing about the configuration;
                    # keep reading, or the trial would block on a full pipe
                    write_fault.append(f"{exc.strerror or exc} ({log_path})")
                    log = _close_quietly(log)
            if progress.search(raw.decode("utf-8", "replace")):
                step_times.append(time.time())
        _close_quietly(log)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()

    killed_by: list[str] = []

    def kill(reason: str, sig: int = signal.SIGTERM) -> None:
        if not killed_by:
            killed_by.append(reason)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass

    def on_signal(signum: int, _frame: object) -> None:
        # scancel / submitit cancel / Ctrl-C reach this wrapper first: pass them on to the trial.
        kill("signal", signal.SIGTERM)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)}
    try:
        while proc.poll() is None:
            now = time.time()
            if launch.timeout_s is not None and now - started_at > launch.timeout_s:
                kill("timeout")
            elif not step_times and launch.init_timeout_s is not None and now - started_at > launch.init_timeout_s:
                kill("init-timeout")
            elif step_times and launch.hang_s is not None and now - step_times[-1] > launch.hang_s:
                kill("hang")
            if killed_by:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    kill(killed_by[0], signal.SIGKILL)
                    proc.wait()
                break
            time.sleep(0.2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not killed_by and stopped_from_outside(proc.returncode):
        killed_by.append("signal")  # the trial died before the wrapper's own handler ran
    reader.join(timeout=10)
    return RunOutcome(
        rank=rank,
        exit_code=proc.returncode,
        killed_by=killed_by[0] if killed_by else None,
        host=socket.gethostname(),
        started_at=started_at,
        ended_at=time.time(),
        first_step_at=step_times[0] if step_times else None,
        last_step_at=step_times[-1] if step_times else None,
        log_path=str(log_path),
        extra={"write_fault": write_fault[0]} if write_fault else {},
    )


def _close_quietly(log: Any) -> None:
    if log is not None:
        try:
            log.close()
        except OSError:
            pass  # the bytes that did not fit are lost either way
