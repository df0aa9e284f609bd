"""A budget pick is read where its fresh runs confirmed it and read highest of arms they cannot tell apart; its claim
is pulled toward its rivals' (flagopt.decide._settle.pulled_claim), and every reader shows the pulled claim.

below5's truth: several +1 to +3.8 % configurations and no +5 % winner. A 60-run study ends on its budget with a
handful of confirmed arms; on seeds 1000-1029 the picks' own fresh runs read +0.12 pp above the truth on average, the
pulled claims -0.19 pp (docs/benchmark-decisions.md, seventy-second-session note).
"""

from __future__ import annotations

import pytest

from flagopt.export import choose
from flagopt.report import study_data
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import run_study

LAND = load_landscape("below5")


def test_a_budget_pick_among_close_confirmed_arms_is_claimed_below_its_own_fresh_runs(tmp_path):
    runner, verdict = run_study(LAND, tmp_path, 0)
    assert verdict.reason == "budget"
    winner = verdict.winner
    assert winner is not None and winner["selection"]["among"] >= 2, verdict.message
    fresh, (lo, hi) = winner["selection"]["fresh_runs_gain"], winner["selection"]["fresh_runs_ci"]
    assert winner["gain"] < fresh
    assert winner["ci"][1] - winner["ci"][0] == pytest.approx(hi - lo)  # moved, not narrowed
    assert f"{winner['gain']:+.1%}" in verdict.message and f"read {fresh:+.1%} by them" in verdict.message
    # the report, the leaderboard and the export show the number the verdict claims, not the fresh runs' reading
    data = study_data(f"sqlite:///{tmp_path}/s.db", runner.space.name)
    shown, fresh_runs = data.shown(data.winner_arm)
    assert (shown.gain, shown.lo, shown.hi) == pytest.approx((winner["gain"], *winner["ci"]))
    assert fresh_runs == data.winner_arm.claim.n
    choice = choose(data)
    assert choice.gain == pytest.approx(winner["gain"]) and choice.ci == pytest.approx(tuple(winner["ci"]))
