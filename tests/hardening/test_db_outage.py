"""Issue 22 D6: a database server that goes away mid-study is waited for; past the wait, one line and a resume.

A MariaDB server of this test's own (scripts/db_server_start.sh on a free port and a folder of its own), stopped
and started again under a live driver; skipped where mariadbd is not installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from tests.hardening.conftest import S0

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("pymysql")


@pytest.fixture
def own_server(tmp_path):
    if not shutil.which("mariadbd") and not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("mariadbd is not installed (bash scripts/db_server_start.sh installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "FLAGOPT_DB_DIR": f"/tmp/flagopt-db-outage-{os.getpid()}", "FLAGOPT_DB_PORT": str(port)}

    def server(action: str) -> None:
        script = "db_server_start.sh" if action == "start" else "db_server_stop.sh"
        subprocess.run(["bash", str(ROOT / "scripts" / script)], env=env, check=True, capture_output=True, timeout=120)

    server("start")
    try:
        yield f"mysql+pymysql://flagopt:flagopt-local@127.0.0.1:{port}/flagopt", server
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "db_server_stop.sh"), "--clean"], env=env, capture_output=True,
                       timeout=120)


def driver(space: Path, url: str, tmp_path: Path, wait_s: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", url,
                             "--no-preflight", "--quiet"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                         "FLAGOPT_ARTIFACTS": str(tmp_path / "artifacts"),
                                                         "FLAGOPT_DB_WAIT_S": str(wait_s)})


def wait_running(url: str, proc: subprocess.Popen) -> None:
    deadline = time.time() + 90
    while time.time() < deadline and proc.poll() is None:
        try:
            trials = optuna.load_study(study_name="s0", storage=url).trials
            if any(t.state == optuna.trial.TrialState.RUNNING and t.user_attrs.get("job_id") for t in trials):
                return
        except Exception:  # noqa: BLE001,S110 (the study is still being created)
            pass
        time.sleep(0.3)
    raise AssertionError("the driver never ran a trial")


def test_a_database_restart_mid_study_is_waited_for_and_a_long_outage_is_one_line(own_server, tmp_path):
    url, server = own_server
    space = tmp_path / "s0.yaml"
    space.write_text(S0.replace("step_s=0.003", "step_s=0.5").replace("max_trials: 4", "max_trials: 2"))
    # a restart within the wait: the driver never notices beyond a pause
    proc = driver(space, url, tmp_path, wait_s=120)
    wait_running(url, proc)
    server("stop")
    time.sleep(5)
    server("start")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    assert [t.state for t in optuna.load_study(study_name="s0", storage=url).trials] == \
        [optuna.trial.TrialState.COMPLETE] * 2
    # an outage longer than the wait: one line, exit 1, the run in flight left for the resume
    space.write_text(space.read_text().replace("max_trials: 2", "max_trials: 3"))
    proc = driver(space, url, tmp_path, wait_s=3)
    wait_running(url, proc)
    server("stop")
    out, err = proc.communicate(timeout=300)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in err.decode(), err.decode()
    assert "the database server did not answer for 3 s" in lines[0] and "run again" in lines[0]
    server("start")
    resumed = driver(space, url, tmp_path, wait_s=120)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    states = [t.state for t in optuna.load_study(study_name="s0", storage=url).trials]
    assert optuna.trial.TrialState.RUNNING not in states and states.count(optuna.trial.TrialState.COMPLETE) == 3
