"""A pair row around a confirmed winner that read far below it runs once more without the values that cost alone
(PairRows.unmasked of flagopt/decide/_pairs.py, design ``pairs-unmasked``): two values that cost a few points each hide
every pair beside them (rand-win-170025: NVLS with pipelined reduce-scatter pays +14.2 % only together; their row
around Ring also set double buffering and the scheduler off, read -10.6 %, and the study ended on Ring, +6.6 %).

The rule on records handed to the planner, and the real driver on a simulated job (SimExecutor):
stress-row-conflict of benchmarks/stress_landscapes.yaml, built on that mechanism.
"""

from __future__ import annotations

from dataclasses import replace

from flagopt.decide import Planner, arms_of, settings_of_record
from flagopt.decide._pairs import PAIRS, PAIRS_UNMASKED
from flagopt.workloads.sim import load_landscape
from tests.decisions.records import run, space_of
from tests.decisions.sim_study import STRESS, run_study


SPACE = """
    name: um
    command: [python, -c, pass]
    params:
      algo: {env: NCCL_ALGO, choices: [Ring, NVLS]}
      prs: {xla: xla_gpu_enable_pipelined_reduce_scatter, choices: [true]}
      db: {xla: xla_gpu_enable_while_loop_double_buffering, choices: [true]}
      lhs: {xla: xla_gpu_enable_latency_hiding_scheduler, choices: [false]}
"""
RING = {"algo": "Ring"}
SINGLES = [(RING, 106.5), ({"algo": "NVLS"}, 100.1), ({"prs": True}, 99.9), ({"db": True}, 96.2), ({"lhs": False}, 96.9)]


def planner_after(space, row, measured, *, phase="refine", winner=RING):
    """A planner, its arms and the winner's arm after the probes, three more runs of the winner and one pair row."""
    runs = [({}, 100.0)] + SINGLES + [({}, 100.0), (winner, 106.6), (winner, 106.4), ({}, 100.0), (winner, 106.7)]
    records = [run(space, i, settings, value) for i, (settings, value) in enumerate(runs)]
    row_run = run(space, len(records), row, measured, design=PAIRS)
    records.append(replace(row_run, attrs={**row_run.attrs, "phase": phase}) if phase else row_run)
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    leader = next(a for a in arms if settings_of_record(space, a.first.attrs["settings"]) == winner)
    return planner, arms, leader


def test_a_row_far_below_the_winner_runs_without_the_values_that_cost_alone(tmp_path):
    space = space_of(tmp_path, SPACE)
    planner, arms, leader = planner_after(space, {"algo": "NVLS", "prs": True, "db": True, "lhs": False}, 89.4)
    (settings, label), = planner.unmasked(arms, leader)
    assert settings == {"algo": "NVLS", "prs": True}
    assert label.endswith("without what costs alone: db, lhs")


def test_a_row_near_the_winner_or_one_before_any_winner_is_left_alone(tmp_path):
    space = space_of(tmp_path, SPACE)
    row = {"algo": "NVLS", "prs": True, "db": True, "lhs": False}
    planner, arms, leader = planner_after(space, row, 103.0)  # 3.6 below the winner: inside the win bar
    assert list(planner.unmasked(arms, leader)) == []
    planner, arms, leader = planner_after(space, row, 89.4, phase="")  # a row of the null race, not around Ring
    assert list(planner.unmasked(arms, leader)) == []


def test_a_row_whose_rest_sets_one_new_value_is_no_hidden_pair(tmp_path):
    space = space_of(tmp_path, SPACE)
    planner, arms, leader = planner_after(space, {"algo": "NVLS", "db": True, "lhs": False}, 89.4)
    assert list(planner.unmasked(arms, leader)) == []  # NVLS alone is its own probe


def test_a_row_whose_rest_is_one_swap_from_the_winner_still_runs_it(tmp_path):
    """stress-row-conflict-250001: the winner set the reduce-scatter, one half of the pair; the rest of the NVLS row
    is the winner with NVLS for Ring, a pair no run set."""
    space = space_of(tmp_path, SPACE)
    winner = {"algo": "Ring", "prs": True}
    planner, arms, leader = planner_after(space, {"algo": "NVLS", "prs": True, "db": True, "lhs": False}, 89.4,
                                          winner=winner)
    (settings, label), = planner.unmasked(arms, leader)
    assert settings == {"algo": "NVLS", "prs": True}
    assert label.endswith("without what costs alone: db, lhs")


def test_the_study_finds_the_pair_a_costly_row_hid(tmp_path):
    land = load_landscape("stress-row-conflict", STRESS)
    runner, verdict = run_study(land, tmp_path, 3)
    unmasked = [r for r in runner.records() if r.attrs.get("design") == PAIRS_UNMASKED and r.ok]
    assert unmasked, [r.profile for r in runner.records()]
    assert verdict is not None and verdict.reason == "win", verdict.message if verdict else None
    assert land.true_gain(verdict.winner["settings"]) > land.best().gain - 0.01
