"""A pair of few-level settings that pays only together, neither half near zero or above alone.

The covering rows of flagopt/decide/_pairs.py, and the real driver on a simulated job (SimExecutor):
stress-hidden-pair of benchmarks/stress_landscapes.yaml, where double buffering costs 1.5 % alone, the LL128 protocol
does nothing alone, and the two pay +9 % together. Every other setting adds up to +2.3 %: without a run that sets
the pair the study has nothing near the win bar and ends on a `null` verdict or its budget.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from flagopt.decide._pairs import PAIRS, covering_rows, pairs_of
from flagopt.space import Param
from flagopt.workloads.sim import landscape_from_data
from tests.decisions.sim_study import run_study

STRESS = Path(__file__).resolve().parents[2] / "benchmarks" / "stress_landscapes.yaml"

PARAMS = [Param("db", "xla", "db", choices=(False, True)), Param("pag", "xla", "pag", choices=(False, True)),
          Param("algo", "env", "ALGO", choices=("Ring", "Tree")),
          Param("proto", "env", "PROTO", choices=("LL", "LL128", "Simple")),
          Param("thr", "xla", "thr", type="int", low=1, high=8), Param("mb", "arg", "mb", choices=(4, 8))]
DEPLOYED = {"db": "false", "pag": "false", "algo": None, "proto": None, "thr": None, "mb": "4"}


def every_pair() -> set:
    values = {"db": [True], "pag": [True], "algo": ["Ring", "Tree"], "proto": ["LL", "LL128", "Simple"]}
    names = list(values)
    return {frozenset({(a, x), (b, y)}) for i, a in enumerate(names) for b in names[i + 1:]
            for x in values[a] for y in values[b]}


def test_rows_cover_every_pair_of_the_few_level_settings_and_nothing_else():
    rows = covering_rows(PARAMS, DEPLOYED, set(), lambda n, v: False, 10)
    assert all(set(row) <= {"db", "pag", "algo", "proto"} for row in rows)  # numbers are no few-level setting
    assert set().union(*(pairs_of(r) for r in rows)) == every_pair()
    # a categorical of three values beside one of two: three rows cover the algorithm-protocol pairs only with a
    # fourth (Ring and Tree each beside LL, LL128 and Simple)
    assert len(rows) <= 6


def test_rows_skip_pairs_already_run_and_values_left_out():
    covered = {frozenset({("db", True), ("proto", p)}) for p in ("LL", "Simple")}
    rows = covering_rows(PARAMS, DEPLOYED, covered, lambda n, v: n == "algo", 1)
    assert len(rows) == 1 and rows[0]["proto"] == "LL128" and rows[0]["db"] is True and "algo" not in rows[0]
    assert covering_rows(PARAMS, DEPLOYED, every_pair(), lambda n, v: False, 3) == []


def test_a_hidden_pair_is_run_together_and_wins(tmp_path):
    land = landscape_from_data("stress-hidden-pair", yaml.safe_load(STRESS.read_text())["stress-hidden-pair"], STRESS)
    runner, verdict = run_study(land, tmp_path, 0)
    records = runner.records()
    rows = [r for r in records if r.attrs.get("design") == PAIRS]
    together = [r for r in rows if r.ok and r.attrs["settings"]["env"].get("NCCL_PROTO") == "LL128"
                and r.attrs["settings"]["xla"].get("xla_gpu_enable_while_loop_double_buffering") is True]
    assert together, [r.profile for r in rows]
    assert verdict is not None and verdict.reason == "win", verdict.message if verdict else None
    winner = verdict.winner["settings"]
    assert winner["env"].get("NCCL_PROTO") == "LL128" and winner["xla"]["xla_gpu_enable_while_loop_double_buffering"]
    assert land.true_gain(winner) >= 0.05
