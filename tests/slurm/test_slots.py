"""One study on several slots of the real local Slurm cluster: 2 slots x 2 nodes at once with a 15 % slower slot, a slot
drained mid-study, and a driver killed with jobs running on both slots."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from flagopt.cli import main
from flagopt.executors._slurm_query import expand_nodelist, node_states, parse_slurm_time
from flagopt.study import arms_of, history, load_study
from tests.slurm.test_study import (
    Watcher,
    node_up,
    run,
    sacct_jobs,
    storage_of,
    trial_attrs,
    wait_until,
    write_space,
)

pytestmark = pytest.mark.slurm


def sim(step_s: float) -> str:
    return f'["{{python}}", "-m", "flagopt.workloads.sim", "landscape=null", "seed=5", "steps=15", "step_s={step_s}"]'


@pytest.fixture
def sim_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sim counts its launches in a file the nodes share: drift and noise then move with every launch."""
    monkeypatch.setenv("FLAGOPT_SIM_STATE", str(tmp_path / "sim-launches"))


@pytest.fixture(autouse=True)
def every_node_up(slurm_cluster: set[str]) -> None:
    """An earlier test may have resumed a node a moment ago: a slot found down at the start would (rightly) be left
    out of the study, which is not what these tests are about."""
    for name in ("node1", "node2", "node3", "node4"):
        wait_until(lambda name=name: node_up(name), 60, f"{name} to be up")


def overlapping(a: dict[str, str], b: dict[str, str]) -> bool:
    return a["Start"] < b["End"] and b["Start"] < a["End"]


def test_two_slots_run_at_once_each_its_own_block(slurm_cluster: set[str], tmp_path: Path, sim_state: None,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FLAGOPT_SIM_NODE_SPEED", "node3=0.85,node4=0.85")  # slot node[3-4] is 15 % slower
    space = write_space(tmp_path, f"""
        name: two-slots
        command: {sim(0.02)}
        executor: {{kind: slurm, slurm: {{slots: ["node[1-2]", "node[3-4]"], nodes: 2}}}}
        params:
          ag: {{xla: xla_gpu_all_gather_combine_threshold_bytes, type: int, low: 1048576, high: 1073741824, log: true}}
        stop: {{max_trials: 12}}
    """)
    storage = storage_of(tmp_path)
    assert run(space, storage, "--trials", "10") == 0
    records = history(load_study(storage, "two-slots"))
    assert len(records) == 10 and all(r.status == "ok" for r in records), [r.attrs.get("failure_reason") for r in records]
    jobs = sacct_jobs([r.attrs["job_id"] for r in records], within_s=60, nodes=2)
    for r in records:  # every trial ran on the nodes of its slot, and only there
        assert sorted(expand_nodelist(jobs[r.attrs["job_id"]]["NodeList"])) == expand_nodelist(r.slot)
    assert {r.slot for r in records if r.is_baseline} == {"node[1-2]", "node[3-4]"}
    by_slot = {s: [jobs[r.attrs["job_id"]] for r in records if r.slot == s] for s in ("node[1-2]", "node[3-4]")}
    assert any(overlapping(a, b) for a in by_slot["node[1-2]"] for b in by_slot["node[3-4]"])  # both slots busy
    # the slow slot's runs are compared with its own baselines: no configuration looks 10 % worse
    study = load_study(storage, "two-slots")
    arms = [a for a in arms_of(history(study), study_noise(study)) if a.estimate is not None]
    slow = [a.estimate.gain for a in arms if {r.slot for r in a.runs} == {"node[3-4]"}]
    level = {s: statistics.mean(r.steady for r in records if r.is_baseline and r.slot == s) for s in by_slot}
    # the offset is real: 0.85 give or take the two slots' drift apart and one or two baselines' 1 % noise each (a
    # 10 % offset measured 0.933 once, in CI); without an offset the ratio would be 1.00 +- 0.02
    assert level["node[3-4]"] / level["node[1-2]"] < 0.93
    # ...but no configuration on that slot pays for it (the slot's level, from one or two of its baselines with 1 %
    # run noise, is shared by its arms: their mean is within a few percent of 0, not at -10 %)
    assert slow and statistics.mean(slow) > -0.04, slow

    capsys.readouterr()
    assert main(["leaderboard", "two-slots", "--storage", storage]) == 0
    out = capsys.readouterr().out
    assert "slots: node[1-2]:" in out and "node[3-4]:" in out and "level -" in out
    assert main(["report", "two-slots", "--storage", storage, "--out", str(tmp_path / "report")]) == 0
    assert "2 slots, each its own block of baselines" in (tmp_path / "report" / "two-slots-tuning.md").read_text()


def study_noise(study: optuna.Study):
    from flagopt.study import noise_of
    return noise_of(study.user_attrs)


def test_a_drained_slot_is_retired_and_the_study_goes_on(slurm_cluster: set[str], tmp_path: Path, sim_state: None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    space = write_space(tmp_path, f"""
        name: drained
        command: {sim(0.05)}
        executor: {{kind: slurm, slurm: {{slots: [node1, node2], pending_deadline_min: 2}}}}
        params:
          ag: {{xla: xla_gpu_all_gather_combine_threshold_bytes, type: int, low: 1048576, high: 1073741824, log: true}}
        stop: {{max_trials: 20}}
    """)
    storage = storage_of(tmp_path)
    drained_at: list[float] = []

    def drain_node2_after_its_first_trial() -> None:
        wait_until(lambda: any(a.get("slot") == "node2" and a.get("status") == "ok"
                               for a in trial_attrs(storage, "drained")), 120, "a trial done on node2")
        subprocess.run(["scontrol", "update", "nodename=node2", "state=drain", "reason=flagopt-test"], check=True)
        drained_at.append(max(a["number"] for a in trial_attrs(storage, "drained")))

    try:
        watcher = Watcher(drain_node2_after_its_first_trial)
        watcher.start()
        code = run(space, storage, "--trials", "9")
        watcher.join_checked()
        out = capsys.readouterr().out
        assert node_states("node2")["node2"].startswith("drain")
    finally:
        subprocess.run(["scontrol", "update", "nodename=node2", "state=resume"], check=False)
        wait_until(lambda: node_up("node2"), 60, "node2 to be up again")

    assert code == 0
    study = load_study(storage, "drained")
    lost = study.user_attrs["flagopt.lost_slots"]
    assert list(lost) == ["node2"] and "node2 is drain" in lost["node2"] and "flagopt-test" in lost["node2"]
    assert "slot node2 lost" in out and "the study goes on with 1 slot (node1)" in out
    records = history(study)
    later = [r for r in records if r.number > drained_at[0] + 2]  # at most the jobs already queued came after
    assert later and all(r.slot == "node1" for r in later)
    ran = [r for r in records if r.status == "ok"]
    jobs = sacct_jobs([r.attrs["job_id"] for r in ran], within_s=60)
    assert all(jobs[r.attrs["job_id"]]["NodeList"] == r.slot for r in ran)  # never moved to other nodes
    capsys.readouterr()
    assert main(["leaderboard", "drained", "--storage", storage]) == 0
    assert "node2: " in (board := capsys.readouterr().out) and "LOST (" in board


def test_resume_reattaches_the_jobs_of_every_slot(slurm_cluster: set[str], tmp_path: Path, sim_state: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the driver below and the resume share the working folder (the space's workdir)
    space = write_space(tmp_path, f"""
        name: killed-slots
        command: {sim(0.4)}
        executor: {{kind: slurm, slurm: {{slots: [node1, node3]}}}}
        params:
          ag: {{xla: xla_gpu_all_gather_combine_threshold_bytes, type: int, low: 1048576, high: 1073741824, log: true}}
        stop: {{max_trials: 20}}
    """)
    storage = storage_of(tmp_path)
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                               "--no-preflight", "--quiet"], cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def running_on_both() -> list[dict] | None:
        running = [a for a in trial_attrs(storage, "killed-slots") if a.get("status") == "running" and a.get("job_id")]
        started = [a for a in running if Path(a["trial_dir"], "rank0.log").exists()]
        return running if {a["slot"] for a in started} == {"node1", "node3"} else None

    try:
        wait_until(running_on_both, 120, "jobs running on both slots")
    finally:
        driver.send_signal(signal.SIGKILL)  # the jobs keep running without their driver
        driver.wait()
    left = [dict(t.user_attrs, number=t.number) for t in load_study(storage, "killed-slots").get_trials(
        states=(optuna.trial.TrialState.RUNNING,))]
    assert {a["slot"] for a in left} == {"node1", "node3"}

    assert run(space, storage, "--trials", "1") == 0  # re-attaches every job left, on both slots, then one more
    records = {r.number: r for r in history(load_study(storage, "killed-slots"))}
    for attrs in left:
        rec = records[attrs["number"]]
        assert (rec.attrs["job_id"], rec.slot, rec.status) == (attrs["job_id"], attrs["slot"], "ok")
        assert Path(rec.attrs["trial_dir"], "rank0.log").read_text().count("completed step: 0,") == 1  # ran once
    jobs = sacct_jobs([a["job_id"] for a in left], within_s=60)
    assert all(jobs[a["job_id"]]["NodeList"] == a["slot"] for a in left)


def test_a_job_queued_behind_a_long_trial_is_not_a_pending_failure(slurm_cluster: set[str], tmp_path: Path) -> None:
    # Two jobs per slot keep the nodes busy: the second waits in Slurm's queue behind the first. Trials of ~9 s
    # against a 4.8 s pending deadline: the deadline counts from the end of the job ahead, not from submission.
    space = write_space(tmp_path, """
        name: queued
        command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.6"]
        executor: {kind: slurm, slurm: {slots: [node4], pending_deadline_min: 0.08}}
        profiles:
          a: {env: {FOO: "1"}}
          b: {env: {FOO: "2"}}
        stop: {max_trials: 3, max_null: 100}
        noise: {baseline_every: 100}
    """)
    storage = storage_of(tmp_path)
    assert run(space, storage) == 0
    records = history(load_study(storage, "queued"))
    assert [r.status for r in records] == ["ok", "ok", "ok"], [r.attrs.get("failure_reason") for r in records]
    jobs = sacct_jobs([r.attrs["job_id"] for r in records])
    waited = [parse_slurm_time(jobs[r.attrs["job_id"]]["Start"]) - parse_slurm_time(jobs[r.attrs["job_id"]]["Submit"])
              for r in records]
    assert max(waited) > 4.8  # one of them did wait in the queue longer than the deadline, behind its own study's job
