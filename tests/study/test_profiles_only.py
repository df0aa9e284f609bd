"""Spaces without params: the study ends on a budget verdict once the profiles are done."""

from __future__ import annotations

from flagopt.cli import main
from flagopt.report import report_data, study_data
from flagopt.study import history, load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def test_profiles_only_recommends_a_confirmed_profile_below_the_win_bar(write_space, storage):
    space = write_space(f"""
        name: profiles-only
        command: {FAULTY}
        params: {{}}
        profiles:
          faster: {{args: {{tokens_per_s: 51500}}}}
        stop: {{win: 0.10, max_trials: 30}}
    """)
    assert run(space, storage) == 0
    study = load_study(storage, "profiles-only")
    verdict = study.user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "budget", verdict["message"]
    assert "every profile was evaluated" in verdict["message"]
    assert verdict["winner"] and verdict["winner"]["label"] == "faster"  # +3 %, confirmed, below the 10 % bar
    faster = [r for r in history(study) if r.profile == "faster"]
    assert len(faster) >= 3 and all(r.status == "ok" for r in faster)


def test_space_without_params_or_profiles_compares_the_baselines_and_stops(write_space, storage):
    space = write_space(f"""
        name: bare
        command: {FAULTY}
        baseline: {{env: {{NCCL_PROTO: Simple}}}}
    """)
    assert run(space, storage) == 0
    study = load_study(storage, "bare")
    verdict = study.user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "budget" and "no profiles and no params" in verdict["message"]
    assert [r.kind for r in history(study)] == ["baseline-deployed", "baseline-no-env"]


def test_nothing_deployed_means_no_baseline_no_env_run(write_space, storage):
    # With no deployed flags or env, baseline-no-env would run baseline-deployed again (issue 13: a study spent
    # 3 of its 5 runs on it).
    space = write_space(f"""
        name: nothing-deployed
        command: {FAULTY}
        baseline: {{args: {{tokens_per_s: 50000}}}}
        profiles:
          faster: {{args: {{tokens_per_s: 51500}}}}
        stop: {{max_trials: 3}}
        noise: {{baseline_every: 100, max_repeats: 1}}
    """)
    assert run(space, storage) == 0
    study = load_study(storage, "nothing-deployed")
    assert [r.kind for r in history(study)] == ["baseline-deployed", "profile"]
    verdict = study.user_attrs["flagopt.verdict"]
    assert verdict["reason"] == "budget" and "every profile was evaluated" in verdict["message"]
    effect = report_data(study_data(storage, "nothing-deployed")).env_effect
    assert effect.startswith("The deployed env is empty") and "was not run" in effect
