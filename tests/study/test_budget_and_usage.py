"""Smaller defects of issue 16: retries within max_trials, reports of one model_tag side by side, --trials < 1."""

from __future__ import annotations

import pytest

from flagopt.cli import main
from flagopt.study import history, load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"{extra}]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def test_retries_of_a_failing_baseline_stay_within_max_trials(write_space, storage):
    space = write_space(f"""
        name: flaky-baseline
        command: {FAULTY.replace("{extra}", ', "scenario=nccl-init"')}
        stop: {{max_trials: 2}}
    """)
    run(space, storage)
    records = history(load_study(storage, "flaky-baseline"))
    assert len(records) == 2, [(r.kind, r.status, r.attrs.get("retries")) for r in records]
    assert all(r.attrs.get("failure_class") == "nccl-init" for r in records)
    verdict = load_study(storage, "flaky-baseline").user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "baseline-failed" and "max_trials (2) runs used" in verdict["message"]


def test_two_studies_of_one_model_tag_report_into_one_folder_side_by_side(write_space, storage, tmp_path, capsys):
    for name in ("cell-a", "cell-b"):
        space = write_space(f"name: {name}\nmodel_tag: llama\ncommand: {FAULTY.replace('{extra}', '')}\n"
                            "stop: {max_trials: 2}\n", f"{name}.yaml")
        assert run(space, storage) == 0
    out = tmp_path / "reports"
    for name in ("cell-a", "cell-b", "cell-a"):
        assert main(["report", name, "--storage", storage, "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["llama-cell-b-tuning.html", "llama-cell-b-tuning.md",
                                                     "llama-tuning.html", "llama-tuning.md"]
    assert "study `cell-a`" in (out / "llama-tuning.md").read_text()
    assert "study `cell-b`" in (out / "llama-cell-b-tuning.md").read_text()
    assert "llama-cell-b-tuning.md" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "0", "x"])
def test_run_trials_below_one_is_a_usage_error(write_space, storage, tmp_path, capsys, value):
    space = write_space(f"name: s\ncommand: {FAULTY.replace('{extra}', '')}\n")
    with pytest.raises(SystemExit) as info:
        run(space, storage, "--trials", value)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --trials: must be" in err and value in err
    assert not (tmp_path / "studies").exists()


def test_a_budget_verdict_says_how_many_runs_the_machine_lost_and_what_to_do(write_space, storage, tmp_path):
    count = tmp_path / "launches"
    space = write_space(f"""
        name: flaky-cluster
        command: {FAULTY.replace("{extra}", f', "scenario=flaky", "fail_first=1", "state={count}"')}
        profiles:
          a: {{env: {{FOO: "1"}}}}
        stop: {{max_trials: 3}}
    """)
    run(space, storage)
    records = history(load_study(storage, "flaky-cluster"))
    assert [r.status for r in records] == ["flake", "ok", "ok"]  # the first launch failed at NCCL init, then its retry
    verdict = load_study(storage, "flaky-cluster").user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "budget"
    assert "max_trials (3) runs used, 1 of them infrastructure failures (NCCL" in verdict["message"]
    assert "raise max_trials by as many" in verdict["message"]


def test_a_budget_verdict_on_a_healthy_cluster_says_nothing_of_infrastructure(write_space, storage):
    space = write_space(f"""
        name: healthy
        command: {FAULTY.replace("{extra}", "")}
        profiles:
          a: {{env: {{FOO: "1"}}}}
        stop: {{max_trials: 2}}
    """)
    run(space, storage)
    verdict = load_study(storage, "healthy").user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "budget" and "infrastructure" not in verdict["message"]
