"""Ctrl-C: the CLI stops cleanly with one line and exit 130; a driver inside another program lets Ctrl-C through."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest

from flagopt.executors import LocalExecutor
from flagopt.space import load_space
from flagopt.study import Progress, StudyRunner, history, load_study, study_folder

ROOT = Path(__file__).resolve().parents[2]
SLOW = '["{python}", "-m", "flagopt.workloads.faulty", "steps=30", "step_s=0.5"]'


def running_job(storage: str, name: str, within_s: float = 90) -> optuna.trial.FrozenTrial:
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            running = load_study(storage, name).get_trials(states=(optuna.trial.TrialState.RUNNING,))
        except Exception:  # the storage is still being created
            running = []
        if running and running[0].user_attrs.get("job_id"):
            return running[0]
        time.sleep(0.2)
    raise AssertionError("no job started")


def test_ctrl_c_in_the_terminal_exits_130_with_one_line_and_no_traceback(write_space, storage, tmp_path):
    space = write_space(f"name: ctrl-c\ncommand: {SLOW}\nstop: {{max_trials: 4}}\n")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    out = open(tmp_path / "driver.out", "wb")  # noqa: SIM115 (closed below)
    # A terminal's Ctrl-C goes to the whole foreground process group: the driver, submitit's controller, its task.
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                               "--no-preflight"], env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                              start_new_session=True)
    out.close()
    try:
        trial = running_job(storage, "ctrl-c")
        time.sleep(1.0)  # the job's controller and task are up
        os.killpg(driver.pid, signal.SIGINT)
        assert driver.wait(timeout=60) == 130
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    time.sleep(1.0)  # a traceback from the job's controller would land in the same file a moment later
    output = (tmp_path / "driver.out").read_text()
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert output.count("cancelled by you") == 1, output
    assert "flagopt: cancelled by you (Ctrl-C)" in output and "resumes the study" in output
    records = {r.number: r for r in history(load_study(storage, "ctrl-c"))}
    assert records[trial.number].status == "cancelled" and all(r.status != "running" for r in records.values())


def test_a_driver_inside_another_program_lets_ctrl_c_interrupt_it(write_space, storage):
    # Inside pytest (or a notebook) the driver's handler swallowed SIGINT/SIGTERM: the study stopped, the test went
    # on, and only SIGKILL stopped the suite. Ctrl-C must reach the caller, after the jobs are cancelled.
    space = load_space(write_space(f"name: embedded\ncommand: {SLOW}\nstop: {{max_trials: 4}}\n"))
    runner = StudyRunner(space, LocalExecutor(study_folder(storage, space.name) / "jobs", timeout_min=2),
                         storage=storage, progress=Progress(quiet=True))

    def interrupt() -> None:
        running_job(storage, "embedded")
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    records = history(load_study(storage, "embedded"))
    assert records and all(r.status != "running" for r in records)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # nothing left installed
