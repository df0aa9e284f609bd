"""A study that ends on its budget ends on a control: the runs before it are bracketed, not extrapolated in drift.

below5's truth: no +5 % winner, several +1-2 % effects. With 20 runs the study cannot confirm a winner and ends on
``max_trials``; its last runs re-run the contenders it will recommend from (seeds 5 and 6: three re-runs each
after the last control without the rule), and a claim made of runs after the last
control rests on a drift curve extrapolated past its data (rand-below-2011: four such runs, +5.05 % claimed, true
+2.9 %). Not when nothing is confirmed better before the last run: that run goes to a contender, which it may confirm
(since the budget's last runs go to the combination first, below5-5 ends that way).
"""

from __future__ import annotations

import pytest

from flagopt.decide import arms_of, runs_used
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import run_study

LAND = load_landscape("below5")
H200X2 = load_landscape("h200x2")


@pytest.mark.parametrize("seed", [5, 6])  # 5: nothing confirmed before the last run; 6: the combination was, before it
def test_a_budget_verdict_comes_after_a_closing_control(tmp_path, seed):
    runner, verdict = run_study(LAND, tmp_path, seed, max_trials=20)
    records = runner.records()
    assert verdict.reason == "budget"
    counted = [r for r in records if r.status != "invalid" and not r.stopped_with_driver]
    assert runs_used(records) == len(counted) == 20
    measured = [r for r in counted if r.ok]
    last = [(r.number, r.kind) for r in measured[-5:]]
    before = arms_of([r for r in records if r.number < measured[-1].number], runner.space.noise,
                     runner.space.metric.direction)
    if runner.planner.best_confirmed(before) is not None:
        # something to recommend: the budget's last run brackets the runs before it (or re-runs a contender right
        # after a control that was already due)
        assert measured[-1].kind != "repeat" or measured[-2].is_baseline, last
        assert measured[-1].is_baseline or measured[-2].is_baseline, last
    else:
        # nothing confirmed better yet: the last run goes to a contender, which it may confirm
        assert measured[-1].kind == "repeat", last


def test_no_closing_control_before_anything_is_confirmed_better(tmp_path):
    # h200x2 seed 3 on its 60 runs: four arms of true +5.1 to +5.5 % reach the budget's last run with two runs each,
    # one short of the three a verdict needs. A control there left the budget verdict nothing to recommend (the
    # deployed job was the pick); the run goes to the contender instead.
    runner, verdict = run_study(H200X2, tmp_path, 3)
    assert verdict.reason == "budget"
    assert verdict.winner is not None, verdict.message
    assert verdict.winner["gain"] > 0.03, verdict.winner


WIN10 = load_landscape("win10")


def test_a_win_is_declared_on_runs_bracketed_by_controls(tmp_path):
    # win10 seed 1015 confirmed a configuration of true +9.9 % on two runs after its last control and claimed
    # +14.1 % [+11.3, +16.9]: the drift curve was extrapolated past its data. A control now follows the winner's last
    # run before the verdict (and the race goes on if the winner no longer holds).
    runner, verdict = run_study(WIN10, tmp_path, 1015)
    assert verdict.reason == "win"
    measured = [r for r in runner.records() if r.ok]
    winner = [r for r in measured if r.config_key == verdict.winner["config_key"]]
    last_control = max(r.number for r in measured if r.is_baseline)
    assert winner[-1].number < last_control, [(r.number, r.kind) for r in measured[-6:]]
    low, high = verdict.winner["ci"]
    assert low <= WIN10.true_gain(verdict.winner["settings"]) <= high, verdict.message


def test_a_win_cut_short_by_the_refinement_budget_is_bracketed_by_a_control(tmp_path):
    # win10 seed 17 spends its 20 refinement runs and the last two go to a combination that becomes the leader: it
    # claimed +13.8 % [+9.8, +17.9] on runs eleven after the last control (true +10.5 %). One control more, past the
    # refinement budget but inside max_trials, brackets them before the verdict.
    runner, verdict = run_study(WIN10, tmp_path, 17)
    assert verdict.reason == "win" and "refinement budget" in verdict.message, verdict.message
    records = runner.records()
    measured = [r for r in records if r.ok]
    assert measured[-1].is_baseline and measured[-1].attrs.get("phase") == "refine", measured[-1].kind
    assert runner.planner.refine_used(records) == runner.space.stop.refine + 1
    winner = [r for r in measured if r.config_key == verdict.winner["config_key"]]
    assert winner[-1].number < measured[-1].number
    low, high = verdict.winner["ci"]
    assert low <= WIN10.true_gain(verdict.winner["settings"]) <= high, verdict.message
