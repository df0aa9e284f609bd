"""A study on a real MariaDB server: the real driver runs it, every reader reads it, the dashboard serves it.

Each test has a database of its own (``fresh_db``); the drivers are real ``python -m flagopt run`` processes on the
simulator, with their trial folders under ``$FLAGOPT_ARTIFACTS``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest

from flagopt.cli import main
from flagopt.logs import parse_steps, steady_state
from flagopt.space import load_space
from flagopt.study import history, load_study
from tests.report.studies import FSDP, HOSTILE_ENV, HOSTILE_FLAG

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = re.compile(r"://[^:/@]+:([^@]+)@")

SLOW = """
name: slow-db
model_tag: slow
parallelism: DP=1
command: ["{{python}}", "-m", "flagopt.workloads.sim", "landscape=win10", "seed=2", "steps=15", "step_s={step_s}"]
timeout_min: 2
baseline:
  env: {{FLAGOPT_SIM_STATE: "{state}"}}
profiles:
  tree: {{env: {{NCCL_ALGO: Tree}}}}
  nvls: {{env: {{NCCL_ALGO: NVLS}}}}
stop: {{max_trials: {max_trials}}}
noise: {{baseline_every: 100}}
"""


def driver_env(artifacts: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "FLAGOPT_STORAGE")}
    return {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "FLAGOPT_ARTIFACTS": str(artifacts)}


def run_driver(space: Path, storage: str, artifacts: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                           "--no-preflight", "--quiet", *extra], cwd=space.parent, env=driver_env(artifacts),
                          capture_output=True, text=True, timeout=600, check=False)


def start_driver(space: Path, storage: str, artifacts: Path, out: Path, *extra: str) -> subprocess.Popen:
    # Output to a file, not a pipe: the local job inherits the driver's stdout and outlives a killed driver.
    with open(out, "wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                                 "--no-preflight", "--quiet", *extra], cwd=space.parent, env=driver_env(artifacts),
                                stdout=sink, stderr=subprocess.STDOUT)


def slow_space(tmp_path: Path, *, step_s: float = 0.3, max_trials: int = 3) -> Path:
    space = tmp_path / "slow.yaml"
    space.write_text(SLOW.format(state=tmp_path / "slow.state", step_s=step_s, max_trials=max_trials))
    return space


def wait_for_running_job(storage: str, name: str, driver: subprocess.Popen, out: Path) -> optuna.trial.FrozenTrial:
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            running = load_study(storage, name).get_trials(states=(optuna.trial.TrialState.RUNNING,))
        except Exception:  # the study is being created
            running = []
        if running and running[0].user_attrs.get("job_id"):
            return running[0]
        assert driver.poll() is None, out.read_text()
        time.sleep(0.2)
    raise AssertionError("no job started")


def comparable(trial: optuna.trial.FrozenTrial) -> dict:
    """What the storage must keep exactly: states, params, values, and the user attrs that are not times or paths."""
    varying = ("_at", "trial_dir", "log_path", "rank_logs", "job_id", "failure_lines", "env")
    attrs = {k: v for k, v in trial.user_attrs.items() if not k.endswith(varying) and k not in varying}
    return {"state": trial.state.name, "params": trial.params, "values": trial.values, "attrs": attrs,
            "distributions": {k: str(d) for k, d in trial.distributions.items()}}


def test_a_study_on_mariadb_keeps_every_run_exactly(fresh_db, tmp_path):
    # The runs are compared with their own logs and with a sqlite copy, not with a second driver on sqlite: the
    # engine places drift on the runs' wall-clock times, so two drivers of one simulated study can (rightly) choose
    # differently late in the study (they did at trial 16 of 16, once in a CI run).
    space = tmp_path / "fsdp.yaml"
    space.write_text(FSDP.format(state=tmp_path / "sim.state", hostile_env=HOSTILE_ENV, hostile_flag=HOSTILE_FLAG))
    started = time.monotonic()
    done = run_driver(space, fresh_db, tmp_path / "artifacts")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    on_db = load_study(fresh_db, "sim-llm-fsdp")
    assert len(on_db.trials) >= 8
    records = history(on_db)
    measured = [r for r in records if r.ok]
    assert measured
    window = load_space(space).metric.window
    for r in measured:  # every float of the steady window, exactly as the driver read it from the log
        steady = steady_state(parse_steps(Path(r.attrs["log_path"]).read_text()), window)
        assert (r.attrs["steady"], r.attrs["window_values"]) == (steady.mean, list(steady.values)), r.label
    assert {r.attrs.get("failure_class") for r in records} >= {"oom", "unknown-flag"}
    hostile = next(r for r in records if r.label == "hostile")
    assert hostile.attrs["env"]["NCCL_HOSTILE"] == HOSTILE_ENV  # every character through the server and back

    sqlite = f"sqlite:///{tmp_path / 'copy.db'}"
    optuna.copy_study(from_study_name="sim-llm-fsdp", from_storage=fresh_db, to_storage=sqlite)
    on_sqlite = load_study(sqlite, "sim-llm-fsdp")
    assert [comparable(t) for t in on_db.trials] == [comparable(t) for t in on_sqlite.trials]
    assert [t.user_attrs for t in on_db.trials] == [t.user_attrs for t in on_sqlite.trials]
    assert on_db.user_attrs == on_sqlite.user_attrs  # the verdict, the executor, the settings
    # the trial folders: under $FLAGOPT_ARTIFACTS (a server URL has no file to put them beside), no lock file there
    trial_dirs = {Path(r.attrs["trial_dir"]).parent for r in records}
    assert trial_dirs == {tmp_path / "artifacts" / "sim-llm-fsdp" / "trials"}
    assert not (tmp_path / "artifacts" / "sim-llm-fsdp" / "driver.lock").exists()
    assert not (tmp_path / "studies").exists()
    # the password is never printed
    password = PASSWORD.search(fresh_db).group(1)
    assert password not in done.stdout + done.stderr and "flagopt:***@" in done.stdout
    print(f"MariaDB study of {len(on_db.trials)} trials: {took:.1f} s")


def test_readers_and_the_dashboard_read_a_study_on_the_server(fresh_db, tmp_path, capsys):
    # Six runs, so that tree's lower bound is clear of zero and the report carries the export command: after five
    # it came out between +0.0 % and +1.9 % from run to run (the runs' times place the drift between the controls),
    # and at 0 in one run of three on the CI machine, with no winner to export.
    space = slow_space(tmp_path, step_s=0.0, max_trials=6)
    assert run_driver(space, fresh_db, tmp_path / "artifacts").returncode == 0
    password = PASSWORD.search(fresh_db).group(1)

    assert main(["leaderboard", "slow-db", "--storage", fresh_db, "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    labels = json.dumps(board)
    assert "tree" in labels and "baseline-deployed" in labels

    assert main(["status", "slow-db", "--storage", fresh_db]) == 0
    assert "running: none" in capsys.readouterr().out

    assert main(["report", "slow-db", "--storage", fresh_db, "-o", str(tmp_path / "report")]) == 0
    written = sorted((tmp_path / "report").iterdir())
    assert [p.suffix for p in written] == [".html", ".md"]
    text = written[1].read_text()
    assert "tree" in text and password not in text and password not in written[0].read_text()
    assert "--storage 'mysql+pymysql://flagopt:***@" in text  # the export command, without the password

    assert main(["export", "slow-db", "--storage", fresh_db, "-o", str(tmp_path / "patch.env.sh")]) in (0, 1)
    capsys.readouterr()

    dashboard = subprocess.Popen([sys.executable, "-m", "flagopt", "dashboard", "--storage", fresh_db, "--port", "0"],
                                 cwd=tmp_path, env=driver_env(tmp_path / "artifacts"), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
    try:
        line = dashboard.stderr.readline()
        base = re.search(r"(http://127\.0\.0\.1:\d+)/dashboard", line)
        assert base, line
        with urllib.request.urlopen(f"{base.group(1)}/api/studies", timeout=30) as response:
            (summary,) = json.load(response)["study_summaries"]
        assert summary["study_name"] == "slow-db"
        with urllib.request.urlopen(f"{base.group(1)}/api/studies/{summary['study_id']}", timeout=30) as response:
            detail = json.load(response)
        assert len(detail["trials"]) == len(load_study(fresh_db, "slow-db").trials)
        # flagopt's live view wrote its note and figures into the study on the server while the driver ran
        assert "tree" in detail["note"]["body"] and detail["plotly_graph_objects"]
    finally:
        dashboard.send_signal(signal.SIGINT)
        dashboard.wait(timeout=30)


def test_a_driver_killed_mid_study_is_resumed_and_its_running_job_reattached(fresh_db, tmp_path):
    space, out = slow_space(tmp_path), tmp_path / "driver.out"
    driver = start_driver(space, fresh_db, tmp_path / "artifacts", out)
    trial = wait_for_running_job(fresh_db, "slow-db", driver, out)
    driver.send_signal(signal.SIGKILL)  # no cleanup at all: the lock row and the running trial stay behind
    driver.wait(timeout=30)
    job_pid = int(trial.user_attrs["job_id"])
    assert os.path.exists(f"/proc/{job_pid}"), "the job died with its driver"

    started = time.monotonic()
    again = run_driver(space, fresh_db, tmp_path / "artifacts")  # no --force: the holder is a dead pid on this host
    assert again.returncode == 0, again.stdout + again.stderr
    records = history(load_study(fresh_db, "slow-db"))
    assert [r.status for r in records] == ["ok"] * 3
    assert records[0].number == trial.number and records[0].attrs["job_id"] == str(job_pid)  # re-attached, not re-run
    log = Path(records[0].attrs["trial_dir"]) / "rank0.log"
    assert log.read_text().count("completed step: 0,") == 1
    print(f"resume after SIGKILL: {time.monotonic() - started:.1f} s to the end of the study")


def test_a_second_driver_is_refused_while_the_first_runs(fresh_db, tmp_path, capsys, monkeypatch):
    space, out = slow_space(tmp_path, max_trials=2), tmp_path / "driver.out"
    first = start_driver(space, fresh_db, tmp_path / "artifacts", out)
    try:
        wait_for_running_job(fresh_db, "slow-db", first, out)
        monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "artifacts"))
        argv = ["run", "--space", str(space), "--storage", fresh_db, "--no-preflight", "--quiet"]
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert re.fullmatch(rf"flagopt: error: mysql\+pymysql://flagopt:\*\*\*@\S+: slow-db: another driver runs this "
                            rf"study \(pid {first.pid} on \S+ since .+, last heartbeat \d+ s ago\); stop it first, or "
                            r"pass --force if it is dead", err), err
        assert main([*argv, "--force"]) == 1
        assert f"--force refused: the driver holding the lock is alive (pid {first.pid} is running on this host)" \
            in capsys.readouterr().err
        assert first.wait(timeout=120) == 0, out.read_text()  # undisturbed
    finally:
        if first.poll() is None:
            first.kill()
    assert [r.status for r in history(load_study(fresh_db, "slow-db"))] == ["ok", "ok"]


def set_holder(url: str, study: str, *, host: str, pid: int, beat_age_s: int, process: str | None = None) -> None:
    """Write the lock row of a driver elsewhere (another host, or a process this host no longer has)."""
    import sqlalchemy
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as db:
        db.execute(sqlalchemy.text("DELETE FROM flagopt_driver_locks WHERE study_name = :s"), {"s": study})
        db.execute(sqlalchemy.text(
            "INSERT INTO flagopt_driver_locks (study_name, host, pid, process, token, since, beat) VALUES "
            "(:s, :host, :pid, :process, 'elsewhere', :since, NOW() - INTERVAL :age SECOND)"),
            {"s": study, "host": host, "pid": pid, "process": process, "since": time.time() - 5000, "age": beat_age_s})
    engine.dispose()


@pytest.mark.parametrize("beat_age_s,taken", [(1000, True), (5, False)], ids=["stale", "fresh"])
def test_force_takes_the_lock_of_a_driver_on_another_host_only_after_its_heartbeat_stopped(fresh_db, tmp_path, capsys,
                                                                                          monkeypatch, beat_age_s, taken):
    monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "artifacts"))
    space = slow_space(tmp_path, step_s=0.0, max_trials=2)
    argv = ["run", "--space", str(space), "--storage", fresh_db, "--no-preflight", "--quiet"]
    assert main([*argv, "--trials", "1"]) == 0  # the study and the lock table exist
    set_holder(fresh_db, "slow-db", host="gpu-login-7", pid=4242, beat_age_s=beat_age_s)
    assert main(argv) == 1
    err = capsys.readouterr().err
    said = re.search(r"another driver runs this study \(pid 4242 on gpu-login-7 since .+, last heartbeat (\d+) s ago"
                     r"(, which is over 120 s: it looks dead)?\); stop it first, or pass --force if it is dead", err)
    assert said and beat_age_s <= int(said.group(1)) <= beat_age_s + 30 and bool(said.group(2)) == taken, err
    assert main([*argv, "--force"]) == (0 if taken else 1)
    err = capsys.readouterr().err
    records = history(load_study(fresh_db, "slow-db"))
    if taken:
        assert [r.status for r in records] == ["ok", "ok"]
    else:
        assert re.search(r"--force refused: the driver holding the lock is alive \(pid 4242 on gpu-login-7 showed a "
                         r"heartbeat \d+ s ago \(taken as dead after 120 s without one\)\)", err), err
        assert len(records) == 1


def test_a_recycled_pid_on_this_host_is_not_taken_for_the_holder(fresh_db, tmp_path, monkeypatch):
    import socket
    monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "artifacts"))
    space = slow_space(tmp_path, step_s=0.0, max_trials=2)
    argv = ["run", "--space", str(space), "--storage", fresh_db, "--no-preflight", "--quiet"]
    assert main([*argv, "--trials", "1"]) == 0
    # pid 1 runs, but it is not the process that took the lock (another start time): the holder is dead
    set_holder(fresh_db, "slow-db", host=socket.gethostname(), pid=1, beat_age_s=1, process="another-boot:1")
    assert main(argv) == 0
    assert len(history(load_study(fresh_db, "slow-db"))) == 2


def test_two_drivers_started_at_once_on_a_fresh_database_one_runs(fresh_db, tmp_path):
    space = slow_space(tmp_path, step_s=0.05, max_trials=2)
    drivers = [start_driver(space, fresh_db, tmp_path / "artifacts", tmp_path / f"driver{i}.out") for i in range(2)]
    codes = sorted(d.wait(timeout=300) for d in drivers)
    outputs = [(tmp_path / f"driver{i}.out").read_text() for i in range(2)]
    assert codes == [0, 1], outputs
    assert sum("another driver runs this study" in o for o in outputs) == 1, outputs
    assert [r.status for r in history(load_study(fresh_db, "slow-db"))] == ["ok", "ok"]
