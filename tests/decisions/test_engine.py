"""The decision engine end to end: the real driver, log parser and classifier on the simulated FSDP landscape.

fsdp64's truth: a 1 GiB all-gather threshold gives +11.6 %, the reduce-scatter threshold and pipelined all-gather
add ~+2 %, a 64 GiB threshold runs out of memory. The engine must screen, confirm the threshold, keep racing, end
on a combination better than the first winner, and never launch the out-of-memory value again.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import run_study

LAND = load_landscape("fsdp64")


def study(tmp_path: Path, seed: int, **options):
    return run_study(LAND, tmp_path, seed, **options)


def flat(settings: dict) -> dict:
    return {k: v for part in (settings or {}).values() for k, v in part.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_study_ends_on_a_better_combination_than_the_first_winner(tmp_path, seed):
    runner, verdict = study(tmp_path, seed)
    records = runner.records()
    assert verdict.reason == "win"
    chosen = flat(verdict.winner["settings"])
    first = LAND.true_gain({"xla_gpu_all_gather_combine_threshold_bytes": 2**30})
    assert LAND.true_gain(chosen) > first + 0.01, chosen
    assert verdict.winner["kind"] == "probe" and len(chosen) >= 2  # a combination of the screen, or one of its variants
    # one-factor probes came first: no configuration is re-run before every probe ran (the screen before the race)
    assert any(r.attrs.get("design") == "probe" for r in records)
    first_repeat = min(r.number for r in records if r.kind == "repeat")
    assert all(r.number < first_repeat for r in records if r.attrs.get("design") == "probe")
    # the claim excludes the runs that selected the winner: the runs after its choice where it has them, else every
    # run after the first
    after = [r for r in records if r.ok and r.attrs.get("phase") == "settle"
             and r.config_key == verdict.winner["config_key"]]
    assert verdict.winner["fresh_runs"] == (len(after) if len(after) >= 2 else verdict.winner["runs"] - 1)
    assert verdict.winner["ci"][0] <= LAND.true_gain(chosen) <= verdict.winner["ci"][1]


def test_an_out_of_memory_value_is_blamed_and_never_launched_again(tmp_path):
    runner, verdict = study(tmp_path, 3, stop={"refine": 60})
    records = runner.records()
    oom = [r for r in records if r.status == "infeasible"]
    assert len(oom) == 1, [(r.label, r.status) for r in oom]
    blames = runner.planner.blames(records)
    assert [(b.param, b.failure_class) for b in blames] == [("xla_gpu_all_gather_combine_threshold_bytes", "oom")]


def test_optuna_sees_controls_at_zero_and_out_of_memory_as_a_constraint_violation(tmp_path):
    runner, _ = study(tmp_path, 3)
    assert any(r.status == "infeasible" for r in runner.records())
    trials = {t.number: t for t in runner.study.get_trials(deepcopy=False)}
    for rec in runner.records():
        trial = trials[rec.number]
        if rec.is_baseline and rec.ok:
            assert trial.value == 0.0
        if rec.status == "infeasible":
            assert trial.state == optuna.trial.TrialState.PRUNED and trial.value is None
            assert trial.system_attrs.get("constraints:oom") == 1.0
    best = runner.study.best_trial
    assert best.user_attrs["kind"] != "baseline-deployed"
