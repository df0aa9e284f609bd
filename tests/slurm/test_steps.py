"""``executor: {kind: slurm-steps}``: trials as ``srun`` steps inside a ``salloc`` allocation, on the real local
cluster. flagopt runs as the allocation's command, as a user runs it in the shell salloc opens."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flagopt.cli import main
from flagopt.study import history, load_study

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]

SPACE = """
    name: steps
    command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.01"]
    executor: {kind: slurm-steps, slurm: {nodes: 2}}
    profiles:
      oom: {args: {scenario: oom, after: 3}}
      faster: {args: {tokens_per_s: 60000}}
    screen: false
    stop: {max_trials: 4}
"""


def steps_of(allocation: str) -> list[tuple[str, str, str, str]]:
    """``(step id, name, nodelist, state)`` of every step of ``allocation``, straight from ``sacct``."""
    out = subprocess.run(["sacct", "-n", "-P", "-j", allocation, "-o", "JobID,JobName,NodeList,State"],
                         capture_output=True, text=True, check=True).stdout
    rows = [tuple(line.split("|")) for line in out.splitlines() if line]
    return [r for r in rows if r[0].startswith(f"{allocation}.") and r[1].startswith("flagopt-")]


def test_trials_run_as_steps_of_the_allocation_flagopt_runs_in(slurm_cluster: set[str], tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent(SPACE))
    storage = f"sqlite:///{tmp_path}/flagopt.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["salloc", "--nodes=2", "--nodelist=node[3-4]", "--time=5", sys.executable, "-m", "flagopt",
                           "run", "--space", str(space), "--storage", storage, "--no-preflight"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "on slurm-steps" in proc.stdout
    study = load_study(storage, "steps")
    allocation = study.user_attrs["flagopt.executor"]["allocation"]
    assert allocation.isdigit() and f"Granted job allocation {allocation}" in proc.stderr
    every = history(study)
    records = {r.profile: r for r in every}
    assert records["baseline-deployed"].status == "ok" and records["faster"].status == "ok"
    assert records["faster"].attrs["delta_pct"] == pytest.approx(20.0, abs=1.0)
    # a failing task still reports: both ranks' outcomes, the failure classified from the log
    assert records["oom"].status == "infeasible" and records["oom"].attrs["failure_class"] == "oom"
    for r in every:
        trial = Path(r.attrs["trial_dir"])
        assert (trial / "rank0.log").exists() and (trial / "rank1.log").exists()
    # Slurm's own record: one step per trial, on both nodes of the allocation, no sbatch job of its own
    steps = steps_of(allocation)
    assert len(steps) == len(every) == 4
    assert {s[2] for s in steps} == {"node[3-4]"}
    assert {s[1] for s in steps} == {f"flagopt-{r.number}" for r in every}


def test_outside_an_allocation_it_is_one_error_and_nothing_is_written(slurm_cluster: set[str], tmp_path: Path,
                                                                      monkeypatch, capsys) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent(SPACE))
    db = tmp_path / "studies" / "flagopt.db"
    assert main(["run", "--space", str(space), "--storage", f"sqlite:///{db}", "--no-preflight"]) == 1
    err = capsys.readouterr().err
    assert "no Slurm allocation" in err and "salloc" in err and "Traceback" not in err
    assert not db.parent.exists()


def test_a_detached_driver_leaves_the_step_running_and_the_next_run_reattaches(slurm_cluster: set[str],
                                                                               tmp_path: Path) -> None:
    """An allocation held apart from the driver (salloc --no-shell), the driver pointed at it by $SLURM_JOB_ID:
    SIGTERM with --detach leaves the trial's step running; the next `run` in the allocation collects it."""
    import re
    import signal
    import time

    import optuna

    granted = subprocess.run(["salloc", "--no-shell", "--nodes=2", "--nodelist=node[3-4]", "--time=5"],
                             capture_output=True, text=True, timeout=120, check=True)
    allocation = re.search(r"Granted job allocation (\d+)", granted.stderr).group(1)
    try:
        space = tmp_path / "space.yaml"
        space.write_text(textwrap.dedent(SPACE).replace("step_s=0.01", "step_s=0.4").replace("max_trials: 4",
                                                                                              "max_trials: 1"))
        storage = f"sqlite:///{tmp_path}/flagopt.db"
        env = {**os.environ, "PYTHONPATH": str(REPO), "SLURM_JOB_ID": allocation, "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                "--no-preflight", "--detach"]
        with open(tmp_path / "driver.out", "wb") as out:
            driver = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                running = load_study(storage, "steps").get_trials(states=(optuna.trial.TrialState.RUNNING,))
            except Exception:  # the storage is being created
                running = []
            if running and running[0].user_attrs.get("job_id") and steps_of_running(allocation):
                break
            assert driver.poll() is None, (tmp_path / "driver.out").read_text()
            time.sleep(0.3)
        else:
            raise AssertionError("no step started")
        driver.send_signal(signal.SIGTERM)
        # 128 + SIGTERM: stopped by a signal, its runs left for the next run (issue 23 point 11)
        assert driver.wait(timeout=60) == 143, (tmp_path / "driver.out").read_text()
        assert steps_of_running(allocation), "the step stopped with its driver"
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        (rec,) = history(load_study(storage, "steps"))
        assert rec.status == "ok" and rec.attrs["job_id"] == running[0].user_attrs["job_id"]
        assert [s[1] for s in steps_of(allocation)] == ["flagopt-0"]  # collected, not run again
    finally:
        subprocess.run(["scancel", allocation], check=False)


def steps_of_running(allocation: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-s", "-j", allocation, "-o", "%i %j"], capture_output=True, text=True,
                         check=False).stdout
    return [line for line in out.splitlines() if "flagopt-" in line]
