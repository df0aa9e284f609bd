"""`flagopt ab` end to end on this machine's CPU: real jobs through the local executor (the faulty workload, the
simulator), real failures, a real Ctrl-C, a real study's export and claim, and the report's A/B section."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flagopt.ab import round_order
from flagopt.cli import main
from flagopt.study import history, load_study

ROOT = Path(__file__).resolve().parents[2]


def faulty_space(tmp_path: Path, *args: str, name: str = "abfaulty") -> Path:
    argv = ", ".join(json.dumps(a) for a in ("{python}", "-m", "flagopt.workloads.faulty", "steps=15", *args))
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        command: [{argv}]
        timeout_min: 2
        metric: {{format: maxtext, field: Tokens/s/device, window: [9, 14]}}
        failures: {{hang_min: 1, init_timeout_min: 1}}
    """))
    return path


def patch(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body + "\n")
    return path


def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/flagopt.db"


def only_record(tmp_path: Path, study: str) -> dict:
    files = sorted((tmp_path / study / "ab").glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def ab(tmp_path: Path, *args: str) -> int:
    return main(["ab", "--storage", storage(tmp_path), *args])


def test_several_patches_run_in_latin_square_rounds_and_the_best_is_named(tmp_path: Path, capsys) -> None:
    space = faulty_space(tmp_path, "step_s=0.01")
    null = patch(tmp_path, "null.env.sh", ": # sets nothing")
    fast = patch(tmp_path, "fast.env.sh", "FLAGOPT_WORKLOAD_ARGS=(tokens_per_s=55000)")  # +10 % throughput
    assert ab(tmp_path, "--space", str(space), "--patch", str(null), "--patch", str(fast), "--pairs", "2") == 0
    out = capsys.readouterr().out
    doc = only_record(tmp_path, "abfaulty")
    assert doc["schema"] == "flagopt.ab/1" and doc["state"] == "done" and doc["study"] is None
    assert [a["label"] for a in doc["arms"]] == ["deployed", "null.env.sh", "fast.env.sh"]
    # every run is recorded with its steady value, in the order of the round's Latin-square row
    runs = sorted(doc["runs"], key=lambda r: r["submitted_at"])
    assert all(r["status"] == "ok" and r["steady"] > 0 for r in runs) and len(runs) == 6
    for rnd in range(2):
        assert [r["arm"] for r in runs if r["round"] == rnd] == round_order(rnd, 3)
    b, c = doc["summary"]["arms"][1:]
    assert b["verdict"] == "no difference" and b["vs_deployed"]["ci"][0] <= 0 <= b["vs_deployed"]["ci"][1]
    assert c["verdict"] == "better" and c["vs_deployed"]["gain"] == pytest.approx(0.10, abs=0.001)
    assert doc["summary"]["best"]["arm"] == "C"
    assert "C fast.env.sh: +10.00 %" in out and "-> BETTER" in out and "best: C" in out
    assert any(line.startswith("round") and "A deployed" in line and "C vs A" in line for line in out.splitlines())


def test_an_oom_in_a_patch_is_a_finding_and_a_flake_is_run_once_more(tmp_path: Path, capsys) -> None:
    space = faulty_space(tmp_path, "step_s=0.01")
    oom = patch(tmp_path, "oom.env.sh", "FLAGOPT_WORKLOAD_ARGS=(scenario=oom)")
    count = tmp_path / "launches"
    flaky = patch(tmp_path, "flaky.env.sh", f"FLAGOPT_WORKLOAD_ARGS=(scenario=flaky state={count} fail_first=1)")
    assert ab(tmp_path, "--space", str(space), "--patch", str(oom), "--patch", str(flaky), "--pairs", "2") == 0
    doc = only_record(tmp_path, "abfaulty")
    oom_runs = [r for r in doc["runs"] if r["arm"] == 1]
    assert [(r["status"], r["failure_class"]) for r in oom_runs] == [("infeasible", "oom")]  # run once, then dropped
    flaky_runs = sorted((r for r in doc["runs"] if r["arm"] == 2), key=lambda r: r["submitted_at"])
    assert [r["status"] for r in flaky_runs] == ["flake", "ok", "ok"] and count.read_text() == "3"
    assert flaky_runs[0]["failure_class"] == "nccl-init" and flaky_runs[1]["round"] == flaky_runs[0]["round"]
    summary = doc["summary"]["arms"]
    assert summary[1]["verdict"] == "fails (oom)" and summary[2]["values"] == summary[0]["values"]
    out = capsys.readouterr().out
    assert "a finding: this patch fails here" in out and "a flake, run once more" in out


def test_when_every_patch_fails_the_deployed_job_is_not_run_alone(tmp_path: Path) -> None:
    space = faulty_space(tmp_path, "step_s=0.01")
    oom = patch(tmp_path, "oom.env.sh", "FLAGOPT_WORKLOAD_ARGS=(scenario=oom)")
    assert ab(tmp_path, "--space", str(space), "--patch", str(oom), "--pairs", "3") == 0
    doc = only_record(tmp_path, "abfaulty")
    assert [(r["round"], r["arm"], r["status"]) for r in doc["runs"]] == [(0, 0, "ok"), (0, 1, "infeasible")]
    assert doc["summary"]["arms"][1]["verdict"] == "fails (oom)"


def test_a_deployed_job_that_fails_stops_the_ab_with_its_reason(tmp_path: Path, capsys) -> None:
    space = faulty_space(tmp_path, "step_s=0.01", "scenario=crash")
    assert ab(tmp_path, "--space", str(space), "--patch", str(patch(tmp_path, "p.env.sh", ":")), "--pairs", "2") == 1
    doc = only_record(tmp_path, "abfaulty")
    assert doc["state"] == "stopped" and "the deployed job itself fails (crash" in doc["stop_reason"]
    assert len(doc["runs"]) == 1  # nothing else was spent
    assert "Run the same command again to resume" in capsys.readouterr().out


def test_bad_input_is_one_error_and_writes_nothing(tmp_path: Path, capsys) -> None:
    space = faulty_space(tmp_path)
    assert ab(tmp_path, "--space", str(space), "--patch", str(tmp_path / "missing.env.sh")) == 2
    assert f"{tmp_path / 'missing.env.sh'}: no such patch file" in capsys.readouterr().err
    assert ab(tmp_path, "--space", str(space), "--trial", "3") == 2
    assert "--trial: needs a study" in capsys.readouterr().err
    assert ab(tmp_path, "--patch", str(patch(tmp_path, "p.env.sh", ":"))) == 2
    assert "give a study or --space FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab(tmp_path, "--space", str(space), "--patch", str(tmp_path / "p.env.sh"), "--pairs", "1")
    assert not (tmp_path / "abfaulty").exists()


def _driver(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "FLAGOPT_STORAGE")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "flagopt", "ab", "--storage", storage(tmp_path), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(predicate, within_s: float, what: str) -> None:
    end = time.time() + within_s
    while not predicate():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _statuses(tmp_path: Path, study: str) -> list[str]:
    files = list((tmp_path / study / "ab").glob("*.json"))
    return [r["status"] for r in json.loads(files[0].read_text())["runs"]] if files else []


def test_ctrl_c_stops_cleanly_and_the_same_command_resumes_the_pairs(tmp_path: Path, capsys) -> None:
    space = faulty_space(tmp_path, "step_s=0.2")  # about 3 s a run: room to interrupt the second
    p = patch(tmp_path, "p.env.sh", "FLAGOPT_WORKLOAD_ARGS=(tokens_per_s=51000)")
    args = ("--space", str(space), "--patch", str(p), "--pairs", "2")
    driver = _driver(tmp_path, *args)
    _wait_for(lambda: _statuses(tmp_path, "abfaulty") == ["ok", "running"], 90, "the second run under way")
    # a second driver of the same A/B while the first is alive would run every pair twice: refused
    assert ab(tmp_path, *args) == 1
    assert f"being run by pid {driver.pid}" in capsys.readouterr().err
    driver.send_signal(signal.SIGINT)
    out, _ = driver.communicate(timeout=60)
    assert driver.returncode == 1, out
    assert "stopped: stopped by SIGINT. Measured 1 runs" in out and "Run the same command again to resume" in out
    doc = only_record(tmp_path, "abfaulty")
    assert doc["state"] == "stopped"
    assert [r["status"] for r in doc["runs"]] == ["ok", "cancelled"] and doc["runs"][1]["cancelled_by"] == "driver"

    # the patch written again with another header (a re-export stamps its time) is the same patch: it resumes
    p.write_text("# exported again, later\n" + p.read_text())
    again = _driver(tmp_path, *args)
    out, _ = again.communicate(timeout=180)
    assert again.returncode == 0, out
    assert f"resuming A/B {doc['id']}" in out
    doc = only_record(tmp_path, "abfaulty")
    measured = [r for r in doc["runs"] if r["status"] == "ok"]
    assert doc["state"] == "done" and len(measured) == 4 and len(doc["runs"]) == 5  # the cancelled run ran again
    assert doc["summary"]["arms"][1]["vs_deployed"]["gain"] == pytest.approx(0.02, abs=0.001)
    # round 1 was finished by the second driver: its pair spans two sessions (on a cloud machine, maybe two machines)
    assert len({r["session"] for r in doc["runs"]}) == 2
    assert doc["summary"]["split_rounds"] == [{"round": 0, "sessions": 2, "hosts": []}]
    assert doc["summary"]["arms"][1]["vs_deployed_whole_rounds"]["pairs"] == 1
    assert "warning: round 1 ran in more than one session (a stop and a resume" in out


SIM = """\
name: sim-ab
model_tag: sim-ab
parallelism: TP=2
command: ["{{python}}", "-m", "flagopt.workloads.sim", "landscape=win10", "seed=2", "steps=15"]
timeout_min: 2
baseline:
  env: {{FLAGOPT_SIM_STATE: "{state}"}}
profiles:
  tree: {{env: {{NCCL_ALGO: Tree}}}}
export: {{guard: false}}
"""


def test_a_study_export_is_checked_against_its_claim_and_the_report_shows_it(tmp_path: Path, capsys) -> None:
    space = tmp_path / "sim.yaml"
    space.write_text(SIM.format(state=tmp_path / "sim.state"))
    assert main(["run", "--space", str(space), "--storage", storage(tmp_path), "--no-preflight", "--quiet",
                 "--trials", "4"]) == 0
    capsys.readouterr()
    # 4 runs decide nothing: no confirmed winner, so no export to verify (issue 23: keep the deployed job)
    assert ab(tmp_path, "sim-ab", "--pairs", "2") == 1
    assert "keep the deployed job" in capsys.readouterr().err
    trial = next(r.number for r in history(load_study(storage(tmp_path), "sim-ab")) if r.profile == "tree")
    assert ab(tmp_path, "sim-ab", "--trial", str(trial), "--pairs", "2") == 0  # the study's own space, that trial
    out = capsys.readouterr().out
    doc = only_record(tmp_path, "sim-ab")
    claim = doc["arms"][1]["claim"]
    assert doc["study"] == "sim-ab" and claim["label"] == "tree" and claim["gain"] > 0.05
    assert Path(doc["arms"][1]["patch"]).read_text().startswith("# flagopt export")
    arm = doc["summary"]["arms"][1]
    est = arm["vs_deployed"]
    inside = est["ci"][0] <= claim["gain"] <= est["ci"][1] or claim["ci"][0] <= est["gain"] <= claim["ci"][1]
    assert arm["agreement"]["agrees"] is inside
    assert f"claim of trial {claim['trial']}" in out
    # a patch file written by `flagopt export` of this study is recognised by its header: same claim
    exported = tmp_path / "winner.env.sh"
    assert main(["export", "sim-ab", "--storage", storage(tmp_path), "--trial", str(trial), "-o", str(exported)]) == 0
    assert ab(tmp_path, "sim-ab", "--patch", str(exported), "--pairs", "2") == 0
    records = sorted((tmp_path / "sim-ab" / "ab").glob("*.json"))
    assert len(records) == 2 and json.loads(records[1].read_text())["arms"][1]["claim"] == claim
    # ... also without naming the study: the header names it, and it is in the storage
    assert ab(tmp_path, "--space", str(space), "--patch", str(exported), "--pairs", "2", "--new") == 0
    records = sorted((tmp_path / "sim-ab" / "ab").glob("*.json"))
    assert len(records) == 3 and json.loads(records[2].read_text())["arms"][1]["claim"] == claim
    assert main(["report", "sim-ab", "--storage", storage(tmp_path), "-o", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "sim-ab-tuning.md").read_text()
    assert "## Independent A/B (`flagopt ab`)" in md and doc["id"] in md
    # nothing confirmed, nothing exported: the report says keep the deployed job, and lists the A/Bs of the trial
    assert "Keep the deployed job" in md and "Independent A/B of the export" not in md


def test_a_local_driver_killed_with_its_job_is_resumed_and_the_lost_run_is_no_finding(tmp_path: Path) -> None:
    space = faulty_space(tmp_path, "step_s=0.2")
    p = patch(tmp_path, "p.env.sh", ": # nothing")
    args = ("--space", str(space), "--patch", str(p), "--pairs", "2")
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "FLAGOPT_STORAGE")}
    env["PYTHONPATH"] = str(ROOT)
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "ab", "--storage", storage(tmp_path), *args],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    _wait_for(lambda: _statuses(tmp_path, "abfaulty") == ["ok", "running"], 90, "the second run under way")
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its local job's controller, as a lost machine would
    driver.wait(timeout=30)
    assert ab(tmp_path, *args) == 0
    doc = only_record(tmp_path, "abfaulty")
    lost = doc["runs"][1]
    assert lost["status"] == "cancelled" and lost["cancelled_by"] == "driver" and "lost with the earlier driver" in \
        lost["failure_reason"]
    assert doc["state"] == "done" and [r["status"] for r in doc["runs"]].count("ok") == 4
    assert doc["summary"]["arms"][1]["verdict"] == "no difference"


def _study_with_controls(storage_url: str, name: str, sigma: float) -> None:
    """A study whose twelve controls vary by ``sigma`` a run (what the A/B judges a slow run by)."""
    import numpy as np
    import optuna
    rng = np.random.default_rng(1)
    study = optuna.create_study(study_name=name, storage=storage_url)
    study.set_user_attr("flagopt.space", {})
    for number in range(12):
        study.add_trial(optuna.trial.create_trial(value=0.0, user_attrs={
            "kind": "baseline-deployed", "profile": "baseline-deployed", "config_key": "k0", "status": "ok",
            "steady": 50000.0 * (1 + sigma * rng.standard_normal()), "started_at": float(number), "settings": {},
            "env": {}}))


def test_a_run_a_slow_node_measured_is_named_against_the_study_noise(tmp_path: Path, capsys) -> None:
    # launch 5 (B's run of round 3: A B, B A, A B ...) runs 5 % slow, as on a slow node; the study's runs vary 0.3 %
    space = faulty_space(tmp_path, "step_s=0.01", f"state={tmp_path / 'launches'}", "slow_launches=5")
    fast = patch(tmp_path, "fast.env.sh", "FLAGOPT_WORKLOAD_ARGS=(tokens_per_s=51000)")  # +2 %
    _study_with_controls(storage(tmp_path), "fsdp", 0.003)
    assert ab(tmp_path, "fsdp", "--space", str(space), "--patch", str(fast), "--pairs", "4") == 0
    out = " ".join(capsys.readouterr().out.split())
    doc = only_record(tmp_path, "fsdp")
    assert doc["noise"]["study"] == "fsdp" and doc["noise"]["controls"] == 12
    assert 0.001 < doc["noise"]["run_sigma"] < 0.006
    assert [(s["round"], s["arm"]) for s in doc["summary"]["stragglers"]] == [(2, "B")]
    b = doc["summary"]["arms"][1]
    assert b["vs_deployed"]["pairs"] == 4 and b["vs_deployed_without_stragglers"]["pairs"] == 3
    assert b["vs_deployed_without_stragglers"]["gain"] == pytest.approx(0.02, abs=0.001)
    assert "warning: B's run in round 3 read 5.0 % below what B's other rounds say" in out, out
    assert "without it: B +2.00 %" in out
    # the same A/B without a study: nothing to judge a slow run by, so nothing is named
    (tmp_path / "launches").unlink()
    assert ab(tmp_path, "--space", str(space), "--patch", str(fast), "--pairs", "4") == 0
    doc = only_record(tmp_path, "abfaulty")
    assert "noise" not in doc and "stragglers" not in doc["summary"]
    assert "warning" not in capsys.readouterr().out
