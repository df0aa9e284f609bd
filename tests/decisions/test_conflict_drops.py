"""A combination that measured clearly below its best part is split: its drop-one variants run before the balanced
rows (issue 25: "gains are sub-additive and change sign with context"; rand-recipe-60004: pipelined all-gather
+4.6 % and pipelined p2p +4.5 % alone, -2.8 % together with Ring, and no run ever set all-gather without p2p).

Moves.conflict_drops of flagopt/decide/_moves.py, the screen that runs them (Screen.next_screen), and the real driver
on a simulated job (SimExecutor): stress-conflict of benchmarks/stress_landscapes.yaml, where pipelined all-gather
(+4.5 %) and pipelined p2p (+4.3 %) measure below zero together with Ring (+2.5 %), and the best (+8.0 %) leaves p2p
out.
"""

from __future__ import annotations

from flagopt.decide import Planner, arms_of, settings_of_record
from flagopt.decide._moves import CONFLICT_DROP, MAX_CONFLICT_DROPS
from flagopt.workloads.sim import load_landscape
from tests.decisions.records import run, space_of
from tests.decisions.sim_study import STRESS, run_study


SPACE = """
    name: cd
    command: [python, -c, pass]
    params:
      gather: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      p2p: {xla: xla_gpu_enable_pipelined_p2p, choices: [true]}
      algo: {env: NCCL_ALGO, choices: [Ring]}
      lhs: {xla: xla_gpu_enable_latency_hiding_scheduler, choices: [false]}
"""
SINGLES = [({"gather": True}, 104.6), ({"p2p": True}, 104.5), ({"algo": "Ring"}, 103.0), ({"lhs": False}, 100.1)]


def planner_after(space, combination, measured, *, design="combination", singles=SINGLES):
    """A planner, its records and arms after two controls, ``singles`` and one run of ``combination``."""
    runs = [({}, 100.0, "probe")] + [(s, v, "probe") for s, v in singles] + [({}, 100.0, "probe")]
    runs.append((combination, measured, design))
    records = [run(space, i, settings, value, design=d) for i, (settings, value, d) in enumerate(runs)]
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    return planner, records, arms_of(records, space.noise)


def test_a_combination_below_its_best_part_is_split_weakest_part_first(tmp_path):
    space = space_of(tmp_path, SPACE, "cd.yaml")
    planner, _, arms = planner_after(space, {"gather": True, "p2p": True, "algo": "Ring"}, 97.2)
    drops = list(planner.conflict_drops(arms, 0))
    assert [set(rest) for rest, _ in drops] == [{"gather", "p2p"}, {"gather", "algo"}, {"p2p", "algo"}]
    assert drops[0][1] == "without algo: gather=true, p2p=true"


def test_the_screen_runs_the_split_before_the_balanced_rows(tmp_path):
    space = space_of(tmp_path, SPACE, "cd.yaml")
    planner, records, arms = planner_after(space, {"gather": True, "p2p": True, "algo": "Ring"}, 97.2)
    config, _, kind = planner.next_screen(records, arms, [], None)
    assert kind == CONFLICT_DROP
    assert settings_of_record(space, config.settings()) == {"gather": True, "p2p": True}


def test_a_shortfall_that_a_costly_part_explains_is_no_conflict(tmp_path):
    space = space_of(tmp_path, SPACE, "cd.yaml")
    costly = [*SINGLES[:3], ({"lhs": False}, 85.0)]  # the scheduler off costs 15 % alone
    planner, _, arms = planner_after(space, {"gather": True, "p2p": True, "lhs": False}, 92.0, singles=costly)
    assert list(planner.conflict_drops(arms, 0)) == []


def test_a_combination_near_its_parts_is_no_conflict(tmp_path):
    space = space_of(tmp_path, SPACE, "cd.yaml")
    planner, _, arms = planner_after(space, {"gather": True, "p2p": True, "algo": "Ring"}, 101.5)  # 3.1 below
    assert list(planner.conflict_drops(arms, 0)) == []


def test_only_the_model_s_combination_is_split_and_the_splits_are_bounded(tmp_path):
    space = space_of(tmp_path, SPACE, "cd.yaml")
    # a balanced row sets settings together to estimate each effect: its drop-ones would spoil the design; an
    # add-one's useful drop-one is its base, already measured
    for design in ("balanced", "add-one", "profile-union"):
        planner, _, arms = planner_after(space, {"gather": True, "p2p": True, "algo": "Ring"}, 97.2, design=design)
        assert list(planner.conflict_drops(arms, 0)) == [], design
    planner, _, arms = planner_after(space, {"gather": True, "p2p": True, "algo": "Ring"}, 97.2)
    assert list(planner.conflict_drops(arms, MAX_CONFLICT_DROPS)) == []


def test_a_combination_spoiled_by_two_settings_near_the_bar_is_split_and_the_study_wins(tmp_path):
    land = load_landscape("stress-conflict", STRESS)
    runner, verdict = run_study(land, tmp_path, 2)
    split = [r for r in runner.records() if r.attrs.get("design") == CONFLICT_DROP and r.ok
             and not r.attrs["settings"]["xla"].get("xla_gpu_enable_pipelined_p2p")]
    assert split, [r.profile for r in runner.records()]
    assert verdict is not None and verdict.reason == "win", verdict.message if verdict else None
    assert land.true_gain(verdict.winner["settings"]) > land.best().gain - 0.01
