"""Trials run through the Slurm backend on the real local cluster: pinning, multi-node, cancel, limits, resume."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from slurm_helpers import make_launch, sacct_field, step_script

from flagopt.errors import StudyError
from flagopt.executors._launch import TrialLaunch
from flagopt.executors._slurm import SlurmExecutor, SlurmSettings, SlurmTrialJob
from flagopt.executors._slurm_query import parse_slurm_time

pytestmark = pytest.mark.slurm


def executor(tmp_path: Path, **settings: object) -> SlurmExecutor:
    return SlurmExecutor(tmp_path / "submitit", SlurmSettings(**settings), poll_interval_s=0.5)


def wait_for_step(job: SlurmTrialJob, log: Path, within_s: float = 60) -> None:
    """Until the trial runs and has written a step line (so a cancel or limit hits a running trial)."""
    end = time.time() + within_s
    while not (log.exists() and "completed step" in log.read_text()):
        assert time.time() < end, f"job {job.job_id} never wrote a step line: {job.status()}"
        time.sleep(0.3)


def test_pinned_trial_runs_on_the_pinned_node(slurm_cluster: set[str], tmp_path: Path) -> None:
    job = executor(tmp_path, nodelist="node2").submit(make_launch(tmp_path / "t", step_script(3, 0.1)))
    result = job.result(timeout_s=120)
    assert result.state == "FINISHED", result.error
    assert result.rank0 is not None and result.rank0.exit_code == 0
    assert result.rank0.extra["slurm_node"] == "node2"
    assert "node=node2" in (tmp_path / "t" / "rank0.log").read_text()
    assert job.nodelist == "node2" == sacct_field(job.job_id, "NodeList")
    times = job.times()
    assert None not in times.values()
    assert times["submitted_at"] <= times["started_at"] <= times["ended_at"]


LAGGING_ACCOUNTING = """\
import os, shutil, subprocess, sys
# The real sacct, but while LAG_END is set its End reads Unknown (slurmdbd lagging the controller).
real = shutil.which("sacct", path=os.environ["REAL_PATH"])
out = subprocess.run([real, *sys.argv[1:]], capture_output=True, text=True)
if os.environ.get("LAG_END") and "End" in sys.argv[-1]:
    out.stdout = "\\n".join("|".join(line.split("|")[:-1] + ["Unknown"]) if line else line
                            for line in out.stdout.split("\\n"))
sys.stdout.write(out.stdout); sys.stderr.write(out.stderr); sys.exit(out.returncode)
"""


def lagging_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a ``sacct`` on PATH that hides the End time while ``LAG_END`` is set."""
    bin_dir = tmp_path / "lag-bin"
    bin_dir.mkdir()
    shim = bin_dir / "sacct"
    shim.write_text(f"#!{sys.executable}\n" + LAGGING_ACCOUNTING)
    shim.chmod(0o755)
    monkeypatch.setenv("REAL_PATH", os.environ["PATH"])
    monkeypatch.setenv("LAG_END", "1")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_the_end_time_is_kept_when_accounting_lags_behind_the_controller(
        slurm_cluster: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lagging_sacct(tmp_path, monkeypatch)  # accounting never has the end while the job is watched
    job = executor(tmp_path, nodelist="node2").submit(make_launch(tmp_path / "t", step_script(2, 0.1)))
    assert job.result(timeout_s=120).state == "FINISHED"
    monkeypatch.delenv("LAG_END")
    times = job.times()
    assert None not in times.values(), times  # the controller's end time, while sacct had none
    assert times["ended_at"] == parse_slurm_time(sacct_field(job.job_id, "End"))


def test_two_node_trial_runs_one_task_per_node(slurm_cluster: set[str], tmp_path: Path) -> None:
    job = executor(tmp_path, nodelist="node1,node2", nodes=2).submit(make_launch(tmp_path / "t", step_script(2, 0.1)))
    result = job.result(timeout_s=120)
    assert result.state == "FINISHED", result.error
    assert [o.rank for o in result.outcomes] == [0, 1]
    assert {o.extra["slurm_node"] for o in result.outcomes} == {"node1", "node2"}
    for outcome in result.outcomes:
        log = tmp_path / "t" / f"rank{outcome.rank}.log"
        assert outcome.log_path == str(log)
        assert f"node={outcome.extra['slurm_node']}" in log.read_text()


def test_cancel_stops_a_running_trial(slurm_cluster: set[str], tmp_path: Path) -> None:
    job = executor(tmp_path, nodelist="node3").submit(make_launch(tmp_path / "t", step_script(1000, 0.2)))
    wait_for_step(job, tmp_path / "t" / "rank0.log")
    assert job.status().state == "RUNNING"
    job.cancel()
    result = job.result(timeout_s=60)
    assert result.state == "CANCELLED"
    assert sacct_field(job.job_id, "State").startswith("CANCELLED")
    # run_trial catches Slurm's SIGTERM and stops the trial itself, so the outcome survives the cancel
    assert [o.killed_by for o in result.outcomes] == ["signal"], result.error


def test_trial_watchdog_timeout_ends_the_job_normally(slurm_cluster: set[str], tmp_path: Path) -> None:
    launch = make_launch(tmp_path / "t", step_script(1000, 0.2), timeout_s=2)
    result = executor(tmp_path, nodelist="node1").submit(launch).result(timeout_s=120)
    assert result.state == "FINISHED"
    assert result.rank0 is not None and result.rank0.killed_by == "timeout"


def test_slurm_time_limit_is_reported_as_timeout(slurm_cluster: set[str], tmp_path: Path) -> None:
    # the trial has no timeout of its own, so only Slurm's 1-minute limit stops it (Slurm checks limits every 30 s)
    launch = make_launch(tmp_path / "t", step_script(100000, 0.5), timeout_s=None)
    job = executor(tmp_path, nodelist="node4", time_min=1).submit(launch)
    result = job.result(timeout_s=240)
    assert result.state == "TIMEOUT"
    assert sacct_field(job.job_id, "State") == "TIMEOUT"
    # Slurm's SIGTERM at the limit (no early USR2) lets run_trial stop the trial and still report it
    assert result.rank0 is not None and result.rank0.killed_by == "signal", result.error


def test_a_command_that_cannot_start_on_the_node_is_exit_127_with_the_reason_in_its_log(
        slurm_cluster: set[str], tmp_path: Path) -> None:
    launch = TrialLaunch(argv=("/nonexistent/trainer",), env={}, workdir=str(tmp_path), trial_dir=str(tmp_path / "t"))
    job = executor(tmp_path, nodelist="node2").submit(launch)
    result = job.result(timeout_s=120)
    assert result.rank0 is not None and result.rank0.exit_code == 127, result.error
    log = Path(result.rank0.log_path).read_text()
    assert "FileNotFoundError" in log and "/nonexistent/trainer" in log
    assert result.rank0.extra.get("slurm_node") == "node2"


def test_unknown_nodelist_fails_at_submit_with_slurms_message(slurm_cluster: set[str], tmp_path: Path) -> None:
    with pytest.raises(StudyError, match="Invalid node name specified"):
        executor(tmp_path, nodelist="node9").submit(make_launch(tmp_path / "t", "pass"))


def test_job_pending_past_its_deadline_is_cancelled_and_reported(
    slurm_cluster: set[str], down_node: object, tmp_path: Path
) -> None:
    down_node("node4", state="drain")  # type: ignore[operator]
    job = executor(tmp_path, nodelist="node4", pending_deadline_s=3).submit(make_launch(tmp_path / "t", "pass"))
    first = job.status()
    assert first.state == "PENDING" and not first.done
    result = job.result(timeout_s=60)
    assert result.state == "CANCELLED" and result.outcomes == ()
    assert "pending_deadline_s=3" in result.error
    assert "node4" in result.error  # Slurm's reason: ReqNodeNotAvail, UnavailableNodes:node4
    assert sacct_field(job.job_id, "State").startswith("CANCELLED")


def test_attach_resumes_a_job_from_a_new_driver(slurm_cluster: set[str], tmp_path: Path) -> None:
    launch = make_launch(tmp_path / "t", step_script(2, 0.5))
    job_id = executor(tmp_path, nodelist="node1").submit(launch).job_id
    again = executor(tmp_path, nodelist="node1")  # a restarted driver: same folder, fresh objects
    attached = again.attach(job_id, launch)
    assert attached is not None and attached.job_id == job_id
    result = attached.result(timeout_s=120)
    assert result.state == "FINISHED" and result.rank0 is not None and result.rank0.exit_code == 0
    assert again.attach("1", launch) is None  # not submitted from this folder


def test_describe_names_the_pinned_nodes(tmp_path: Path, slurm_cluster: set[str]) -> None:
    described = executor(tmp_path, nodelist="node[1-2]", partition="debug", nodes=2).describe()
    assert described["kind"] == "slurm"
    assert (described["nodelist"], described["partition"], described["nodes"]) == ("node[1-2]", "debug", 2)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
