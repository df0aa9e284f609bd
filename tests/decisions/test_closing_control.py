"""A study that ends on its budget ends on a control: the runs before it are bracketed, not extrapolated in drift.

below5's truth: no +5 % winner, several +1-2 % effects. With 20 runs the study cannot confirm a winner and ends on
``max_trials``; its last runs re-run the contenders it will recommend from, and a claim made of runs after the last
control rests on a drift curve extrapolated past its data (rand-below-2011: four such runs, +5.05 % claimed, true
+2.9 %).
"""

from __future__ import annotations

import pytest

from flagopt.decide import runs_used
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import run_study

LAND = load_landscape("below5")


@pytest.mark.parametrize("seed", [3, 5])
def test_a_budget_verdict_comes_after_a_closing_control(tmp_path, seed):
    runner, verdict = run_study(LAND, tmp_path, seed, max_trials=20)
    records = runner.records()
    assert verdict.reason == "budget"
    counted = [r for r in records if r.status != "invalid" and not r.stopped_with_driver]
    assert runs_used(records) == len(counted) == 20
    measured = [r for r in counted if r.ok]
    last_control = max(i for i, r in enumerate(measured) if r.is_baseline)
    # at most the one run the budget had left after a control that was already due
    assert len(measured) - 1 - last_control <= 1, [(r.number, r.kind) for r in measured[last_control:]]
