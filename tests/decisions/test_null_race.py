"""A null study ends on the null verdict: repeats stop once an arm cannot reach ``stop.null_gain``.

The null landscape: nothing matters, 1 % run noise, 3 % drift. Seeds 10 and 18 ran out of the 60-run budget before
the null-race floor (statistics.md §7): arms estimated at +0.5 to +1.6 % were re-run up to ``max_repeats`` times.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
import pytest

from benchmarks._flagopt_run import clean_environment
from benchmarks._sim_executor import SimExecutor
from benchmarks._spaces import write_space
from flagopt.study import Progress, StudyRunner, arms_of
from flagopt.workloads.sim import load_landscape

LAND = load_landscape("null")


def study(tmp_path: Path, seed: int):
    space = write_space(LAND, seed, tmp_path, max_trials=60)
    executor = SimExecutor(tmp_path / "jobs", base_env=clean_environment(LAND))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        runner = StudyRunner(space, executor, storage=f"sqlite:///{tmp_path}/s.db", progress=Progress(quiet=True),
                             force=True, poll_s=0.0)
        verdict = runner.run()
    return runner, verdict


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
