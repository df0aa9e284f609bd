"""``--detach`` on SIGTERM/SIGINT, and ``--force`` against a live driver: real drivers, real local jobs."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy

from flagopt.cli import main
from flagopt.study import history, load_study

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}  # the driver runs this checkout


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def start_driver(space, storage, tmp_path, *extra) -> subprocess.Popen:
    # Output to a file, not a pipe: the local job inherits the driver's stdout and outlives a detached driver.
    out = open(tmp_path / "driver.out", "wb")  # noqa: SIM115 (closed with the process)
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                               "--no-preflight", *extra], env=ENV, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    return driver


def output_of(tmp_path) -> str:
    return (tmp_path / "driver.out").read_text()


def wait_for_running_job(storage: str, name: str, driver: subprocess.Popen) -> optuna.trial.FrozenTrial:
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            running = load_study(storage, name).get_trials(states=(optuna.trial.TrialState.RUNNING,))
        except Exception:  # the storage is being created
            running = []
        if running and running[0].user_attrs.get("job_id"):
            return running[0]
        assert driver.poll() is None, (Path(driver.args[driver.args.index("--space") + 1]).parent / "driver.out").read_text()
        time.sleep(0.2)
    raise AssertionError("no job started")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_detach_returns_within_seconds_and_the_next_run_reattaches(write_space, storage, tmp_path, signum):
    space = write_space(f"""
        name: detached
        workdir: {tmp_path}
        command: ["{{python}}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.6"]
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        stop: {{max_trials: 2, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    driver = start_driver(space, storage, tmp_path, "--detach")
    trial = wait_for_running_job(storage, "detached", driver)
    job_pid = int(trial.user_attrs["job_id"])  # the local job's controller
    sent = time.time()
    driver.send_signal(signum)  # to the driver only, as `kill` does (not the terminal's process group)
    driver.wait(timeout=60)
    took = time.time() - sent
    output = output_of(tmp_path)
    assert took < 5, f"the driver took {took:.1f} s to detach"
    assert driver.returncode == 128 + signum and "re-attaches it" in output  # the shell's status for the signal
    assert os.path.exists(f"/proc/{job_pid}"), "the job was stopped with its driver"
    (left,) = load_study(storage, "detached").get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert left.number == trial.number

    assert run(space, storage) == 0
    records = history(load_study(storage, "detached"))
    assert [(r.number, r.kind, r.status) for r in records] == [(trial.number, "baseline-deployed", "ok"),
                                                              (trial.number + 1, "baseline-no-env", "ok")]
    assert records[0].attrs["job_id"] == str(job_pid)
    log = Path(records[0].attrs["trial_dir"]) / "rank0.log"
    assert log.read_text().count("completed step: 0,") == 1  # ran once, to its end, never re-run


def test_force_refuses_to_take_the_lock_of_a_live_driver(write_space, storage, tmp_path, capsys):
    space = write_space("""
        name: forced
        command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.3"]
        baseline: {env: {FLAGOPT_DEPLOYED: "1"}}  # something deployed, so wave 1 is both baselines
        stop: {max_trials: 2, max_null: 100}
        noise: {baseline_every: 100}
    """)
    first = start_driver(space, storage, tmp_path)
    wait_for_running_job(storage, "forced", first)
    assert run(space, storage, "--force") == 1
    err = capsys.readouterr().err.strip()
    assert f"--force refused: the driver holding the lock is alive (pid {first.pid} is running on this host)" in err
    assert first.wait(timeout=120) == 0, output_of(tmp_path)  # undisturbed: no UpdateFinishedTrialError
    assert [r.status for r in history(load_study(storage, "forced"))] == ["ok", "ok"]


@pytest.mark.parametrize("beat_age,taken", [(1000.0, True), (5.0, False)])
def test_force_on_a_lock_held_from_another_host_needs_a_stale_heartbeat(write_space, storage, tmp_path, capsys,
                                                                        beat_age, taken):
    space = write_space("""
        name: nfs
        command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]
        stop: {max_trials: 1}
    """)
    # a driver on another host holds the lock: its row in the study storage's lock table (issue 22: the lock lives
    # with the storage, not in the trial folder)
    (tmp_path / "studies").mkdir()
    optuna.storages.RDBStorage(storage).engine.dispose()
    engine = sqlalchemy.create_engine(storage)
    with engine.begin() as db:
        db.execute(sqlalchemy.text(
            "CREATE TABLE flagopt_driver_locks (study_name VARCHAR(512) PRIMARY KEY, host VARCHAR(255) NOT NULL, "
            "pid INTEGER NOT NULL, process VARCHAR(64), token VARCHAR(32) NOT NULL, since FLOAT NOT NULL, "
            "beat DATETIME NOT NULL)"))
        db.execute(sqlalchemy.text(
            "INSERT INTO flagopt_driver_locks VALUES ('nfs', :host, 4242, NULL, 'elsewhere', :since, "
            "datetime('now', :age))"), {"host": f"not-{socket.gethostname()}", "since": time.time() - 2000,
                                         "age": f"-{int(beat_age)} seconds"})
    engine.dispose()
    assert run(space, storage) == 1
    assert "another driver runs this study (pid 4242 on not-" in capsys.readouterr().err
    assert run(space, storage, "--force") == (0 if taken else 1)
    err = capsys.readouterr().err
    if taken:
        records = history(load_study(storage, "nfs"))
        assert records and all(r.status == "ok" for r in records)
    else:
        assert re.search(r"on not-\S+ showed a heartbeat \d+ s ago \(taken as dead after 120 s without one\)", err)
        assert not load_study(storage, "nfs").trials
