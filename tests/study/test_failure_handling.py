"""Failures met by a real study: each class is recorded and handled as the policy says (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna

from flagopt.cli import main
from flagopt.study import history, load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.005"]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def by_profile(records):
    out: dict[str, list] = {}
    for r in records:
        out.setdefault(r.profile, []).append(r)
    return out


def test_each_failure_class_is_classified_and_handled(write_space, storage, tmp_path):
    state = tmp_path / "flaky.state"
    space = write_space(f"""
        name: failing
        command: {FAULTY}
        failures: {{hang_min: 0.05, init_timeout_min: 0.2}}
        profiles:
          oom: {{args: {{scenario: oom}}}}
          removed_flag: {{xla: {{xla_gpu_enable_async_all_gather: true}}, args: {{scenario: unknown-flag}}}}
          same_flag_again: {{xla: {{xla_gpu_enable_async_all_gather: true}}, env: {{OTHER: "1"}}}}
          flaky: {{args: {{scenario: flaky, state: "{state}", fail_first: 2}}}}
          hang: {{args: {{scenario: hang, after: 3}}}}
          benign: {{args: {{scenario: sigterm-after-window}}}}
          nan: {{args: {{scenario: nan}}}}
        stop: {{max_trials: 30, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    assert run(space, storage) == 0
    records = history(load_study(storage, "failing"))
    groups = by_profile(records)

    (oom,) = groups["oom"]
    assert oom.status == "infeasible" and oom.attrs["failure_class"] == "oom"
    assert oom.attrs["failure_details"].get("requested_bytes") == 4770354232
    study = optuna.load_study(study_name="failing", storage=storage)
    assert study.trials[oom.number].constraints  # the samplers see it as infeasible

    (removed,) = groups["removed_flag"]
    assert removed.status == "invalid" and removed.attrs["failure_class"] == "unknown-flag"
    (again,) = groups["same_flag_again"]  # excluded after the first rejection: never launched
    assert again.status == "invalid" and "not run" in again.attrs["failure_reason"]
    assert "job_id" not in again.attrs

    flaky = groups["flaky"]
    assert [r.status for r in flaky] == ["flake", "flake", "ok"]
    assert [r.attrs.get("retry_of") for r in flaky] == [None, flaky[0].number, flaky[0].number]
    assert all(r.attrs["failure_class"] == "nccl-init" for r in flaky[:2])

    hang = groups["hang"]
    assert all(r.attrs["failure_class"] == "hang" and r.attrs["killed_by"] == "hang" for r in hang)
    assert len(hang) == 2  # one retry, linked
    assert hang[1].attrs["retry_of"] == hang[0].number

    (benign,) = groups["benign"]
    assert benign.status == "ok" and "benign" in benign.attrs

    (nan,) = groups["nan"]
    assert nan.status == "failed" and nan.attrs["failure_class"] in ("numerics-nan", "incomplete")


def test_sigkilled_driver_resumes_without_losing_or_rerunning(write_space, storage, tmp_path):
    space = write_space(f"""
        name: killed
        workdir: {tmp_path}
        command: ["{{python}}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.25"]
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        profiles:
          p: {{env: {{FOO: "1"}}}}
        stop: {{max_trials: 3, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                               "--no-preflight"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    trial_log = tmp_path / "studies" / "killed" / "trials" / "0" / "rank0.log"
    deadline = time.time() + 60
    while time.time() < deadline and (not trial_log.exists() or "completed step: 2," not in trial_log.read_text()):
        time.sleep(0.2)
    assert trial_log.exists(), driver.stdout.read().decode()
    driver.send_signal(signal.SIGKILL)  # mid-trial: the job keeps running without its driver
    driver.wait()
    (running,) = load_study(storage, "killed").get_trials(states=(optuna.trial.TrialState.RUNNING,))
    job_id = running.user_attrs["job_id"]

    assert run(space, storage) == 0  # re-attaches trial 0, then carries on
    records = history(load_study(storage, "killed"))
    assert [r.number for r in records] == [0, 1, 2]
    assert records[0].attrs["job_id"] == job_id and records[0].status == "ok"
    assert records[0].attrs["steady"] > 0
    assert trial_log.read_text().count("completed step: 0,") == 1  # ran once, never re-run
    assert [r.kind for r in records] == ["baseline-deployed", "baseline-no-env", "profile"]


def test_second_driver_on_the_same_study_is_refused(write_space, storage, tmp_path, capsys):
    space = write_space("""
        name: locked
        command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.3"]
        stop: {max_trials: 2}
    """)
    first = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                              "--no-preflight"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30  # until the first driver holds the lock: its row in the storage (issue 22)
        while time.time() < deadline and not _lock_row(tmp_path / "studies" / "flagopt.db", "locked"):
            time.sleep(0.1)
        assert run(space, storage) != 0
        err = capsys.readouterr().err
        assert "another driver runs this study" in err and str(first.pid) in err
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    # SIGTERM stops cleanly: the running job is cancelled and its trial recorded, not left RUNNING.
    records = history(load_study(storage, "locked"))
    assert records and all(r.status != "running" for r in records)


def _lock_row(db, study: str) -> bool:
    import sqlite3
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return bool(con.execute("SELECT 1 FROM flagopt_driver_locks WHERE study_name = ?", (study,)).fetchall())
        finally:
            con.close()
    except sqlite3.Error:
        return False


def _chain_study(write_space, storage, tmp_path, name, faults):
    """One configuration whose launches fail with ``faults`` in turn (then run fine): exit code and its runs."""
    space = write_space(f"""
        name: {name}
        command: {FAULTY}
        failures: {{hang_min: 0.05, init_timeout_min: 0.2}}
        profiles:
          p: {{args: {{scenario: flaky, state: "{tmp_path / 'launches.state'}", faults: "{faults}"}}}}
        stop: {{max_trials: 8, max_null: 100}}
        noise: {{baseline_every: 100}}
    """)
    code = run(space, storage)
    return code, by_profile(history(load_study(storage, name)))["p"]


def test_each_class_counts_its_own_retries_in_a_chain(write_space, storage, tmp_path):
    """A hang, an NCCL init failure and one coordination timeout on one configuration are three unrelated flakes:
    the configuration runs a fourth time and the study goes on."""
    code, runs = _chain_study(write_space, storage, tmp_path, "chain", "hang,nccl-init,coordination-timeout")
    assert code == 0
    classes = [r.attrs.get("failure_class") for r in runs]
    assert classes == ["hang", "nccl-init", "coordination-timeout", None], classes
    assert [r.status for r in runs][-1] == "ok"
    assert all(r.attrs.get("retry_of") == runs[0].number for r in runs[1:])


def test_a_class_that_uses_up_its_own_retries_stops_the_study(write_space, storage, tmp_path):
    """Three coordination timeouts in a row: the cluster's coordination service is what is broken."""
    code, runs = _chain_study(write_space, storage, tmp_path, "broken",
                              "coordination-timeout,coordination-timeout,coordination-timeout")
    assert code != 0
    classes = [r.attrs.get("failure_class") for r in runs]
    assert classes == ["coordination-timeout"] * 3, classes
    verdict = optuna.load_study(study_name="broken", storage=storage).user_attrs.get("flagopt.verdict")
    assert verdict is None  # a stopped study draws no verdict
