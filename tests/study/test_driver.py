"""The study driver end to end, with real processes launched through submitit and a real sqlite storage."""

from __future__ import annotations

import json
from collections import Counter

import optuna
import pytest

from flagopt.cli import main
from flagopt.study import history, load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.005"]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def test_resume_continues_the_study_without_duplicates(write_space, storage):
    space = write_space(f"""
        name: resume
        command: {FAULTY}
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        params:
          tps: {{arg: tokens_per_s, choices: [50000, 50100, 49900]}}
        profiles:
          a: {{env: {{FOO: "1"}}}}
          b: {{env: {{FOO: "2"}}}}
        stop: {{max_trials: 7, max_null: 50}}
        noise: {{baseline_every: 3}}
    """)
    assert run(space, storage, "--trials", "3") == 0
    first = history(load_study(storage, "resume"))
    assert [r.kind for r in first] == ["baseline-deployed", "baseline-no-env", "profile"]
    assert run(space, storage) == 0
    records = history(load_study(storage, "resume"))
    assert [r.number for r in records[:3]] == [r.number for r in first]  # earlier trials untouched
    kinds = Counter(r.kind for r in records)
    assert kinds["baseline-no-env"] == 1
    assert Counter(r.profile for r in records if r.kind == "profile") == {"a": 1, "b": 1}
    assert len(records) == 7  # max_trials counts every run, across both invocations
    assert all(r.status == "ok" for r in records)
    assert run(space, storage) == 0  # nothing left to do: no new trial
    assert len(history(load_study(storage, "resume"))) == 7


def test_trial_records_are_readable_without_flagopt(write_space, storage, tmp_path):
    space = write_space(f"""
        name: records
        command: {FAULTY}
        baseline: {{xla_flags: "--xla_gpu_enable_latency_hiding_scheduler=true", env: {{NCCL_PROTO: Simple}}}}
        profiles:
          p: {{xla: {{xla_gpu_enable_pipelined_all_gather: true}}, args: {{tokens_per_s: 51000}}}}
        stop: {{max_trials: 3}}
    """)
    assert run(space, storage) == 0
    study = optuna.load_study(study_name="records", storage=storage)
    frame = study.trials_dataframe()
    assert {"user_attrs_kind", "user_attrs_xla_flags", "user_attrs_steady", "user_attrs_delta_pct",
            "user_attrs_status", "user_attrs_log_path", "user_attrs_host", "user_attrs_job_id"} <= set(frame.columns)
    profile = next(t for t in study.trials if t.user_attrs["kind"] == "profile")
    attrs = profile.user_attrs
    assert attrs["xla_flags"].split()[-2:] == ["--xla_gpu_enable_latency_hiding_scheduler=true",
                                               "--xla_gpu_enable_pipelined_all_gather=true"]
    assert attrs["env"]["NCCL_PROTO"] == "Simple"
    assert attrs["argv"][-1] == "tokens_per_s=51000"
    assert len(attrs["steps"]) == 15 and attrs["steady"] == pytest.approx(51000, rel=1e-3)
    assert attrs["delta_pct"] == pytest.approx(2.0, abs=0.1)
    assert profile.value == pytest.approx(attrs["gain"])
    trial_dir = tmp_path / "studies" / "records" / "trials" / str(profile.number)
    assert (trial_dir / "rank0.log").read_text().count("completed step") == 15
    command = json.loads((trial_dir / "command.json").read_text())
    assert command["env"]["XLA_FLAGS"] == attrs["xla_flags"]
    assert "--xla_gpu_enable_pipelined_all_gather=true" in (trial_dir / "rerun.sh").read_text()
    assert main(["leaderboard", "records", "--storage", storage]) == 0


def test_leaderboard_of_missing_study_is_one_clear_error(storage, capsys):
    assert main(["leaderboard", "nope", "--storage", storage]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0] and "no such study" in err[0]
