"""`flagopt ab` on the real local Slurm cluster: the runs go to the pinned nodes, a killed driver's job is followed
again by the same command, which then finishes the pairs; rounds spread over several slots, each round on one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flagopt.executors._slurm_query import expand_nodelist, parse_slurm_time
from tests.slurm.test_study import sacct_jobs, wait_until

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[2]


def space_file(tmp_path: Path, slurm: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: abslurm
        command: ["{{python}}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.2"]
        timeout_min: 3
        metric: {{format: maxtext, field: Tokens/s/device, window: [9, 14]}}
        executor: {{kind: slurm, slurm: {slurm}}}
    """))
    return path


def driver(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "FLAGOPT_STORAGE")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "flagopt", "ab", "--storage", f"sqlite:///{tmp_path}/f.db", *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def record(tmp_path: Path) -> dict:
    files = sorted((tmp_path / "abslurm" / "ab").glob("*.json"))
    return json.loads(files[0].read_text()) if files else {"runs": []}


def squeue_state(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False).stdout.strip()


def test_a_killed_driver_is_resumed_by_the_same_command_on_the_pinned_node(slurm_cluster: set[str],
                                                                          tmp_path: Path) -> None:
    space = space_file(tmp_path, "{nodelist: node3}")
    patch = tmp_path / "p.env.sh"
    patch.write_text("FLAGOPT_WORKLOAD_ARGS=(tokens_per_s=52000)\n")
    args = ("--space", str(space), "--patch", str(patch), "--pairs", "2")
    first = driver(tmp_path, *args)

    def second_job_running() -> str | None:
        runs = record(tmp_path)["runs"]
        if len(runs) == 2 and runs[1]["status"] == "running" and squeue_state(str(runs[1]["job_id"])) == "RUNNING":
            return str(runs[1]["job_id"])
        return None

    orphan = wait_until(second_job_running, 120, "the second job running on Slurm")
    os.killpg(first.pid, signal.SIGKILL)  # the driver dies; its Slurm job does not
    first.communicate(timeout=30)
    assert squeue_state(orphan) in ("RUNNING", "COMPLETING", "")  # left alone (or just finished)

    again = driver(tmp_path, *args)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert f"following job {orphan} again" in out
    doc = record(tmp_path)
    assert doc["state"] == "done"
    job_ids = [str(r["job_id"]) for r in doc["runs"]]
    assert [r["status"] for r in doc["runs"]] == ["ok"] * 4 and len(set(job_ids)) == 4  # nothing ran twice
    assert job_ids[1] == orphan
    for job in sacct_jobs(job_ids).values():
        assert expand_nodelist(job["NodeList"]) == ["node3"], job
    assert doc["summary"]["arms"][1]["vs_deployed"]["gain"] == pytest.approx(0.04, abs=0.001)


def test_rounds_spread_over_slots_and_each_round_stays_on_its_slot(slurm_cluster: set[str], tmp_path: Path) -> None:
    space = space_file(tmp_path, "{nodelist: node1}")
    patch = tmp_path / "p.env.sh"
    patch.write_text(": # nothing\n")
    done = driver(tmp_path, "--space", str(space), "--patch", str(patch), "--pairs", "2",
                  "--slot", "node1", "--slot", "node2")
    out, _ = done.communicate(timeout=300)
    assert done.returncode == 0, out
    doc = record(tmp_path)
    assert doc["executor"]["slots"] == ["node1", "node2"]
    jobs = sacct_jobs([str(r["job_id"]) for r in doc["runs"]])
    for rnd in range(2):
        runs = [r for r in doc["runs"] if r["round"] == rnd]
        nodes = {expand_nodelist(jobs[str(r["job_id"])]["NodeList"])[0] for r in runs}
        assert len(runs) == 2 and nodes == {runs[0]["slot"]}, (rnd, runs, jobs)
    assert {r["slot"] for r in doc["runs"]} == {"node1", "node2"}
    # the two rounds ran side by side: a job of one slot overlaps a job of the other
    spans = {slot: [(parse_slurm_time(jobs[str(r["job_id"])]["Start"]), parse_slurm_time(jobs[str(r["job_id"])]["End"]))
                    for r in doc["runs"] if r["slot"] == slot] for slot in ("node1", "node2")}
    assert any(a0 < b1 and b0 < a1 for a0, a1 in spans["node1"] for b0, b1 in spans["node2"]), spans
