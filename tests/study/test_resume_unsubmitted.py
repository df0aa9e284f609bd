"""Resume after a driver that died between writing a trial's record and submitting its job (no ``job_id``)."""

from __future__ import annotations

from collections import Counter

from flagopt.cli import main
from flagopt.render import render
from flagopt.space import load_space
from flagopt.study import history, load_study, study_folder

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.005"]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def leave_unsubmitted(space_path, storage, kind: str, profile_name: str) -> int:
    """The state ``_launch`` leaves when the driver dies right before ``executor.submit``."""
    space = load_space(space_path)
    config = next(p for p in space.profiles if p.profile == profile_name) if kind == "profile" else None
    study = load_study(storage, space.name)
    trial = study.ask()
    trial_dir = study_folder(storage, space.name) / "trials" / str(trial.number)
    trial_dir.mkdir(parents=True)
    if config is None:
        from flagopt.space import TrialConfig
        config = TrialConfig(kind, kind)
    rendered = render(space, config)
    for key, value in {"kind": kind, "profile": config.profile, "config_key": config.config_key,
                       "settings": config.settings(), "status": "running", "epoch": 0,
                       "xla_flags": rendered.xla_flags, "env": rendered.env, "argv": list(rendered.argv),
                       "trial_dir": str(trial_dir), "submitted_at": 0.0}.items():
        trial.set_user_attr(key, value)
    return trial.number


def test_profile_never_submitted_is_run_on_resume(write_space, storage):
    space = write_space(f"""
        name: unsubmitted
        command: {FAULTY}
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
        profiles:
          a: {{env: {{FOO: "1"}}}}
          b: {{env: {{FOO: "2"}}}}
        stop: {{max_trials: 8, max_null: 50}}
        noise: {{baseline_every: 100}}
    """)
    assert run(space, storage, "--trials", "1") == 0  # baseline-deployed only
    lost = leave_unsubmitted(space, storage, "profile", "a")
    assert run(space, storage, "--trials", "3") == 0
    records = history(load_study(storage, "unsubmitted"))
    stale = next(r for r in records if r.number == lost)
    assert stale.status == "cancelled" and "driver died" in stale.attrs["failure_reason"]
    ok_profiles = Counter(r.profile for r in records if r.kind == "profile" and r.status == "ok")
    assert ok_profiles == {"a": 1, "b": 1}  # the profile that never ran is run, once; nothing else is repeated
    assert Counter(r.kind for r in records if r.status == "ok")["baseline-no-env"] == 1


def test_baseline_no_env_never_submitted_is_run_on_resume(write_space, storage):
    space = write_space(f"""
        name: unsubmitted-noenv
        command: {FAULTY}
        baseline: {{env: {{NCCL_PROTO: Simple}}}}
        profiles:
          a: {{env: {{FOO: "1"}}}}
        stop: {{max_trials: 8, max_null: 50}}
        noise: {{baseline_every: 100}}
    """)
    assert run(space, storage, "--trials", "1") == 0
    leave_unsubmitted(space, storage, "baseline-no-env", "baseline-no-env")
    assert run(space, storage, "--trials", "1") == 0
    records = history(load_study(storage, "unsubmitted-noenv"))
    assert [r.kind for r in records if r.status == "ok"] == ["baseline-deployed", "baseline-no-env"]


def test_a_cancelled_run_measured_nothing_and_does_not_use_the_budget(write_space, storage):
    # Stopping a study (Ctrl-C, SIGTERM at a time limit, scancel) cancels the run in flight; on resume it is run again,
    # and it must not also take a slot of max_trials: a 2-GPU study stopped at 19 of 20 ended on budget with its
    # last probe never measured.
    space = write_space(f"""
        name: cancelled-budget
        command: {FAULTY}
        baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}
        profiles:
          a: {{env: {{FOO: "1"}}}}
          b: {{env: {{FOO: "2"}}}}
        stop: {{max_trials: 4, max_null: 50}}
        noise: {{baseline_every: 100}}
    """)
    assert run(space, storage, "--trials", "1") == 0
    leave_unsubmitted(space, storage, "profile", "a")
    assert run(space, storage) == 0
    study = load_study(storage, "cancelled-budget")
    records = history(study)
    assert Counter(r.status for r in records) == {"ok": 4, "cancelled": 1}
    assert {r.profile for r in records if r.kind == "profile" and r.status == "ok"} == {"a", "b"}
    assert study.user_attrs["flagopt.verdict"]["reason"] == "budget"
