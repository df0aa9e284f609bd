"""A null study ends on the null verdict: repeats stop once an arm cannot reach ``stop.null_gain``.

The null landscape: nothing matters, 1 % run noise, 3 % drift. Seeds 10 and 18 ran out of the 60-run budget before
the null-race floor (statistics.md §7): arms estimated at +0.5 to +1.6 % were re-run up to ``max_repeats`` times.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flagopt.study import arms_of
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import run_study

LAND = load_landscape("null")


def study(tmp_path: Path, seed: int):
    return run_study(LAND, tmp_path, seed)


@pytest.mark.parametrize("seed", [10, 18])
def test_a_null_study_ends_on_the_null_verdict_within_the_budget(tmp_path, seed):
    runner, verdict = study(tmp_path, seed)
    records = runner.records()
    assert verdict.reason == "null", verdict.message
    assert len(records) < runner.space.stop.max_trials
    assert verdict.winner is None


def test_no_arm_is_re_run_once_it_fell_below_the_null_race_floor(tmp_path):
    runner, _ = study(tmp_path, 10)
    records = runner.records()
    space, planner = runner.space, runner.planner
    for i, rec in enumerate(records):
        if rec.kind != "repeat":
            continue
        before = [a for a in arms_of(records[:i], space.noise, space.metric.direction) if a.config_key == rec.config_key]
        arm = before[0]
        if arm.n >= space.noise.min_runs:
            # from min_runs on the floor is the bar itself (it does not depend on the run noise estimate)
            assert arm.estimate.gain >= space.stop.null_gain, (rec.number, arm.label, arm.n, arm.estimate.gain)
