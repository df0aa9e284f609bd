"""A study is bound to what it measures: an invalidating change is refused with a diff, a harmless one is said."""

from __future__ import annotations

import optuna
import pytest

from flagopt.cli import main
from flagopt.space import load_space
from flagopt.study import current_history, history, load_study
from flagopt.study._fingerprint import compare, fingerprint

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s={step_s}"]'
SPACE = """
    name: bound
    command: {command}
    baseline: {{env_file: deployed.env}}
    params:
      tps: {{arg: tokens_per_s, choices: {choices}}}
    stop: {{max_trials: {max_trials}, max_null: 50}}
    screen: false  # these tests are about sampled points
    noise: {{baseline_every: 100}}
"""


def write(write_space, tmp_path, *, step_s="0.003", choices="[50000, 50100]", max_trials=40, env="NCCL_PROTO=Simple"):
    (tmp_path / "deployed.env").write_text(f"export {env}\n")
    return write_space(SPACE.format(command=FAULTY.replace("{step_s}", step_s), choices=choices, max_trials=max_trials))


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def junk(study: optuna.Study) -> list[int]:
    """Trials that are not a flagopt record with a final status (what a crashed ask leaves behind)."""
    return [t.number for t in study.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.RUNNING or "status" not in t.user_attrs]


def measured_already(record) -> bool:
    """A sampled point not run because the study had measured it (its repeats are the race's)."""
    return record.status == "invalid" and "measured already" in record.attrs.get("failure_reason", "")


def test_changed_command_is_refused_with_a_diff_then_rebaselined(write_space, storage, tmp_path, capsys):
    assert run(write(write_space, tmp_path), storage, "--trials", "3") == 0
    before = history(load_study(storage, "bound"))
    capsys.readouterr()
    slower = write(write_space, tmp_path, step_s="0.004")
    assert run(slower, storage) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"flagopt: error: {slower}: study 'bound' has 3 runs of another setup; these changes make "
                          "them incomparable:\n")
    assert '  command[4]: "step_s=0.003" -> "step_s=0.004"\n' in err
    assert "a new `name:`" in err and "--rebaseline" in err and "Traceback" not in err
    study = load_study(storage, "bound")
    assert len(history(study)) == 3 and not junk(study)

    assert run(slower, storage, "--rebaseline", "--trials", "2") == 0
    assert "epoch 1 starts with new baselines; the 3 earlier runs are kept but not mixed in (command[4])" in \
        " ".join(capsys.readouterr().out.split())
    study = load_study(storage, "bound")
    assert study.user_attrs["flagopt.epoch"] == 1
    assert [r.kind for r in current_history(study)] == ["baseline-deployed", "baseline-no-env"]
    assert [r.number for r in history(study)][:3] == [r.number for r in before]
    assert run(slower, storage, "--trials", "1") == 0  # the new epoch resumes like any study: no refusal


def test_env_file_content_and_removed_choice_are_invalidating(write_space, storage, tmp_path, capsys):
    assert run(write(write_space, tmp_path), storage, "--trials", "3") == 0
    capsys.readouterr()
    assert run(write(write_space, tmp_path, env="NCCL_PROTO=LL"), storage) == 1
    assert '  baseline.env.NCCL_PROTO: "Simple" -> "LL"\n' in capsys.readouterr().err
    ran = next(r.attrs["settings"]["args"]["tokens_per_s"] for r in history(load_study(storage, "bound"))
               if r.kind == "sampled")
    kept = 50000 if ran == 50100 else 50100
    assert run(write(write_space, tmp_path, choices=f"[{kept}]"), storage) == 1  # drops a value a run set
    assert f"  params.tps.choices: [50000, 50100] -> [{kept}] (drops {ran})\n" in capsys.readouterr().err
    study = load_study(storage, "bound")
    assert len(history(study)) == 3 and not junk(study)


def test_removing_what_no_run_set_keeps_the_study(write_space, storage, tmp_path, capsys):
    """issue 23 point 1: a param pre-flight rejected was never run; removing it put aside every valid run."""
    (tmp_path / "deployed.env").write_text("export NCCL_PROTO=Simple\n")
    unused = SPACE.replace("      tps:", "      unused: {{env: NCCL_ALGO, choices: [Tree, Ring]}}\n      tps:")
    command = FAULTY.replace("{step_s}", "0.003")
    assert run(write_space(unused.format(command=command, choices="[50000, 50100]", max_trials=40)), storage,
               "--trials", "2") == 0  # the two baselines: no run sets NCCL_ALGO
    capsys.readouterr()
    assert run(write(write_space, tmp_path), storage, "--trials", "1") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "params.unused removed; no run of this study set it" in out
    assert load_study(storage, "bound").user_attrs.get("flagopt.epoch", 0) == 0


def test_new_choice_and_wider_budget_are_accepted_and_said(write_space, storage, tmp_path, capsys):
    assert run(write(write_space, tmp_path, max_trials=40), storage, "--trials", "4") == 0
    assert any(r.kind == "sampled" for r in history(load_study(storage, "bound")))
    first = len(load_study(storage, "bound").trials)
    capsys.readouterr()
    wider = write(write_space, tmp_path, choices="[50000, 50100, 52000]", max_trials=60)
    assert run(wider, storage, "--trials", "3") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "space changed, earlier runs still valid: params.tps.choices adds 52000; settings.stop.max_trials 40 -> 60" \
        in out
    study = load_study(storage, "bound")
    ran = [r for r in history(study) if not measured_already(r)]
    assert not junk(study) and all(r.status == "ok" for r in ran)
    assert study.user_attrs.get("flagopt.epoch", 0) == 0 and len(ran) == 7
    new_sampled = [t for t in study.trials[first:] if t.user_attrs["kind"] == "sampled"]
    assert new_sampled and all(set(t.params) == {"tps@2"} for t in new_sampled)  # a fresh Optuna name, no crash
    assert all(t.user_attrs["settings"]["args"]["tokens_per_s"] == t.params["tps@2"] for t in new_sampled)


def test_removed_choice_with_rebaseline_leaves_no_junk_trial(write_space, storage, tmp_path):
    assert run(write(write_space, tmp_path), storage, "--trials", "4") == 0
    assert run(write(write_space, tmp_path, choices="[50100, 49000]"), storage, "--rebaseline", "--trials", "4") == 0
    study = load_study(storage, "bound")
    assert not junk(study) and all(r.status == "ok" for r in history(study) if not measured_already(r))
    sampled = [r for r in current_history(study) if r.kind == "sampled" and r.status == "ok"]
    assert sampled and all(r.attrs["settings"]["args"]["tokens_per_s"] in (50100, 49000) for r in sampled)


@pytest.mark.parametrize("edit,invalidates", [
    ("low: 1, high: 16", False), ("low: 2, high: 8", True), ("low: 1, high: 8, log: true", True),
    ("low: 1, high: 8, step: 2", True),
])
def test_numeric_domains_wider_is_harmless_narrower_is_not(tmp_path, edit, invalidates):
    def fp(domain: str, extra: str = "") -> dict:
        path = tmp_path / "s.yaml"
        path.write_text(f"name: s\ncommand: [python3]\nparams:\n  n: {{arg: n, type: int, {domain}}}\n{extra}")
        return fingerprint(load_space(path))

    (change,) = compare(fp("low: 1, high: 8"), fp(edit))
    assert change.invalidates is invalidates
    added = compare(fp("low: 1, high: 8"), fp("low: 1, high: 8", "  m: {arg: m, choices: [1, 2]}\n"))
    assert [(c.key, c.invalidates) for c in added] == [("params.m", False)]
    removed = compare(fp("low: 1, high: 8", "  m: {arg: m, choices: [1, 2]}\n"), fp("low: 1, high: 8"))
    assert [(c.key, c.invalidates) for c in removed] == [("params.m", True)]


def test_fingerprint_attr_is_a_short_hash_and_an_old_full_one_still_resumes(write_space, storage, tmp_path, capsys):
    """`optuna studies` prints every study user attr: the 8-12 KB fingerprint stays out of it, and a study that
    stored the full dictionary there (before the hash) still resumes and still refuses an invalidating change."""
    space = write(write_space, tmp_path)
    assert run(space, storage, "--trials", "2") == 0
    study = load_study(storage, "bound")
    visible = study.user_attrs["flagopt.fingerprint"]
    assert isinstance(visible, str) and visible.startswith("sha256:") and len(visible) == 23
    full = fingerprint(load_space(space))
    # the old layout: the full dictionary in the user attr, nothing in the system attr
    study._storage.set_study_system_attr(study._study_id, "flagopt.fingerprint.full", None)
    study.set_user_attr("flagopt.fingerprint", full)
    assert run(space, storage, "--trials", "1") == 0  # same space: resumes
    assert load_study(storage, "bound").user_attrs["flagopt.fingerprint"] == visible
    study.set_user_attr("flagopt.fingerprint", full)
    study._storage.set_study_system_attr(study._study_id, "flagopt.fingerprint.full", None)
    capsys.readouterr()
    assert run(write(write_space, tmp_path, step_s="0.004"), storage) == 1  # still compared with the old text
    assert "command[4]" in capsys.readouterr().err
