"""A null study ends on the null verdict: repeats stop once an arm cannot reach ``stop.null_gain``.

The null landscape: nothing matters, 1 % run noise, 3 % drift. Seeds 10 and 18 ran out of the 60-run budget before
the null-race floor (statistics.md §7): arms estimated at +0.5 to +1.6 % were re-run up to ``max_repeats`` times.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks._random_landscapes import random_landscape
from benchmarks.rejected_flag import null_with_rejected_flag
from flagopt.decide import configurations, excluded_by
from flagopt.study import arms_of
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import STRESS, run_study

LAND = load_landscape("null")


def study(tmp_path: Path, seed: int):
    return run_study(LAND, tmp_path, seed)


# 1012: the model's last combination stayed unrun past the proposal budget and held the null verdict off to the end
@pytest.mark.parametrize("seed", [10, 18, 1012])
def test_a_null_study_ends_on_the_null_verdict_within_the_budget(tmp_path, seed):
    runner, verdict = study(tmp_path, seed)
    records = runner.records()
    assert verdict.reason == "null", verdict.message
    assert len(records) < runner.space.stop.max_trials
    assert verdict.winner is None
    # a negative finding about the configurations that ran, not about all the space can set (it was not measured)
    assert "configurations measured (of" in verdict.message and "nothing the space can set" not in verdict.message
    # what the rule checked: no gain confirmed above the bar, and the best measured named with its reading (which may
    # be above the bar on runs too few to confirm it)
    space = runner.space
    measured = [a for a in arms_of(records, space.noise, space.metric.direction) if a.estimate is not None]
    best = max(measured, key=lambda a: a.estimate.gain)
    assert f"none confirmed better than {space.stop.null_gain:+.0%} (best: {best.label} {best.estimate.gain:+.1%}" \
        in verdict.message, verdict.message


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


def test_a_space_smaller_than_max_null_is_done_once_each_configuration_was_measured(tmp_path):
    """rand-null-1027 sets four booleans, 15 configurations: max_null (25) distinct ones never exist, and the sampler
    re-proposed them until the budget ended with no verdict."""
    land = random_landscape("rand-null", 1027, tmp_path)
    runner, verdict = run_study(land, tmp_path / "study", 1027)
    space = runner.space
    size = configurations(space.params, runner.planner.deployed)
    assert size < space.stop.max_null
    assert verdict.reason == "null", verdict.message
    assert len(runner.records()) < space.stop.max_trials
    measured = {a.config_key for a in arms_of(runner.records(), space.noise, space.metric.direction)
                if a.estimate is not None}
    assert len(measured) >= size
    assert "nothing the space can set is worth deploying" in verdict.message  # every configuration ran


def test_a_small_space_with_a_value_that_fails_alone_is_measured_to_its_last_configuration(tmp_path):
    """rand-null-5035: NCCL_ALGO (deployed unset) and three booleans, 31 configurations, of which the pipelined
    reduce-scatter's 16 run out of memory. Counted with them, the space was never done; the sampler cannot set
    NCCL_ALGO back to unset, so it re-proposed measured points until the budget, which ended on a sampled point
    claimed at +2.1 % (true +0.4 %). The 15 that can run are each measured, and the verdict is `null`."""
    land = random_landscape("rand-null", 5035, tmp_path)
    runner, verdict = run_study(land, tmp_path / "study", 5035)
    records = runner.records()
    assert [b.param for b in runner.planner.blames(records)] == ["xla_gpu_enable_pipelined_reduce_scatter"]
    assert_every_runnable_configuration_measured(runner, verdict, size=31, runnable=15)
    assert any(r.attrs.get("design") == "remaining" and r.ok for r in records)


def test_a_small_space_with_a_flag_the_installed_xla_rejects_is_measured_to_its_last_configuration(tmp_path):
    """Two booleans, NCCL_PROTO (deployed unset) and a flag the installed XLA does not know: 31 configurations, of
    which the 16 that set the unknown flag can never run. Its probe is not run (``invalid``, unknown-flag) and, until
    the planner counted such a value out, the space was never done: the sampler re-proposed measured points until the
    60-run budget ended on a `budget` verdict. The 15 that can run are each measured, and the verdict is `null`."""
    land = null_with_rejected_flag(tmp_path / "landscape")
    rejected = next(name for name in land.space_params() if name in land.unknown_flags)
    runner, verdict = run_study(land, tmp_path / "study", 1)
    records = runner.records()
    assert [(b.param, b.failure_class) for b in runner.planner.blames(records)] == [(rejected, "unknown-flag")]
    assert_every_runnable_configuration_measured(runner, verdict, size=31, runnable=15)
    assert len(records) < 30
    # its best configuration ran once: the message gives its one run, not an interval of a fit with a degree of
    # freedom or two (+0.8 % [-41.1 %, +42.7 %])
    assert "on its one run, unknown)" in verdict.message, verdict.message


def test_a_null_verdict_waits_for_an_arm_the_model_puts_above_its_bar(tmp_path):
    """stress-below-three-200010: three settings of +1.0 to +1.2 % each, true best +3.4 %. The study ended `null` at
    its 31st run, with a balanced-screen row the model put at +2.6 % +- 0.5 % (true +1.9 %) never run again: a row
    only informs the effects unless it reads far above the bar. Raced before the verdict, the study goes on to
    confirm a configuration better than the deployed job, and recommends it."""
    land = load_landscape("stress-below-three", STRESS)
    runner, verdict = run_study(land, tmp_path, 200010)
    assert any(str(r.attrs.get("reason", "")).startswith("before a null verdict") for r in runner.records())
    assert verdict.reason == "budget", verdict.message
    assert verdict.winner is not None, verdict.message
    settings = {k: v for part in (verdict.winner.get("settings") or {}).values() for k, v in part.items()}
    assert land.true_gain(settings) >= runner.space.stop.null_gain, settings


def assert_every_runnable_configuration_measured(runner, verdict, *, size: int, runnable: int) -> None:
    """The space has ``size`` configurations, ``runnable`` of them not covered by a blame; each of those was
    measured and the verdict is `null`."""
    space, planner, records = runner.space, runner.planner, runner.records()
    assert configurations(space.params, planner.deployed) == size
    assert configurations(space.params, planner.deployed, excluded=excluded_by(planner.blames(records))) == runnable
    assert verdict.reason == "null" and not verdict.winner, verdict.message
    measured = {a.config_key for a in arms_of(records, space.noise, space.metric.direction)
                if a.estimate is not None and a.kind != "baseline-no-env"}
    assert len(measured) == runnable
