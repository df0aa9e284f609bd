"""The pure parts of `flagopt ab`: the Latin-square order, the paired interval, the agreement, the summary."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from flagopt.ab import agreement, paired, round_order, summarize, williams_rows


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_williams_rows_are_latin_and_balance_the_arm_before(k: int) -> None:
    rows = williams_rows(k)
    assert all(sorted(row) == list(range(k)) for row in rows)
    for position in range(k):  # every arm in every position equally often
        assert Counter(row[position] for row in rows) == Counter({a: len(rows) // k for a in range(k)})
    followers = Counter((row[i], row[i + 1]) for row in rows for i in range(k - 1))
    assert len(followers) == k * (k - 1) and len(set(followers.values())) == 1  # every ordered pair, equally often


def test_two_arms_alternate_ab_ba() -> None:
    assert [round_order(r, 2) for r in range(4)] == [[0, 1], [1, 0], [0, 1], [1, 0]]


def test_paired_interval_is_the_t_interval_of_the_log_ratios() -> None:
    a = [100.0, 102.0, 98.0, 101.0]
    b = [103.0, 104.0, 101.0, 104.5]
    est = paired(b, a, "maximize")
    logs = [math.log(y / x) for x, y in zip(a, b)]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3)
    assert est.gain == pytest.approx(math.expm1(mean))
    assert (est.lo, est.hi) == (pytest.approx(math.expm1(mean - half)), pytest.approx(math.expm1(mean + half)))
    assert est.verdict == "better" and est.pairs == 4
    assert paired(a, b, "maximize").verdict == "worse"


def test_a_step_time_metric_counts_lower_as_better() -> None:
    est = paired([0.9, 0.91, 0.89], [1.0, 1.0, 1.0], "minimize")
    assert est.gain == pytest.approx(1 / 0.9 - 1, abs=0.003) and est.verdict == "better"  # A's time / B's


def test_rounds_with_a_missing_run_drop_out_and_one_pair_has_no_interval() -> None:
    est = paired([101.0, None, 99.0], [100.0, 100.0, None], "maximize")
    assert est.pairs == 1 and est.lo is None and est.verdict == "too few pairs"
    assert paired([101.0, 99.5, 100.5], [100.0, 100.0, 100.0], "maximize").verdict == "no difference"


def test_agreement_either_interval_contains_the_other_gain() -> None:
    est = paired([103.0, 101.0, 102.0], [100.0, 100.0, 100.0], "maximize")  # about +2 % [+0.5, +3.5]
    assert agreement(est, 0.025, None)[0] is True  # the claim lies inside the A/B interval
    assert agreement(est, 0.06, (0.0, 0.07))[0] is True  # the A/B gain lies inside the claim's interval
    assert agreement(est, 0.06, (0.05, 0.07))[0] is False
    assert agreement(est, None, None) is None


def _doc(runs: list[dict]) -> dict:
    return {"pairs": 2, "metric": {"direction": "maximize"},
            "arms": [{"name": "A", "label": "deployed"}, {"name": "B", "label": "oom.env.sh"},
                     {"name": "C", "label": "fast.env.sh", "claim": {"trial": 4, "gain": 0.1, "ci": [0.05, 0.15]}}],
            "runs": runs}


def test_summary_reports_a_failing_patch_as_a_finding_and_the_best_patch() -> None:
    runs = [{"round": 0, "arm": 0, "status": "ok", "steady": 100.0},
            {"round": 0, "arm": 1, "status": "infeasible", "failure_class": "oom", "failure_reason": "RESOURCE_EXHAUSTED"},
            {"round": 0, "arm": 2, "status": "flake", "failure_class": "nccl-init"},
            {"round": 0, "arm": 2, "status": "ok", "steady": 110.0},
            {"round": 1, "arm": 2, "status": "ok", "steady": 111.0},
            {"round": 1, "arm": 0, "status": "ok", "steady": 101.0}]
    s = summarize(_doc(runs))
    b, c = s["arms"][1], s["arms"][2]
    assert b["verdict"] == "fails (oom)" and b["failures"][0]["failure_class"] == "oom"
    assert c["values"] == [110.0, 111.0] and c["verdict"] == "better"
    assert c["agreement"]["agrees"] is True
    assert s["best"]["arm"] == "C"


@pytest.mark.parametrize("k, rounds", [(2, 4), (4, 4), (3, 6)])
def test_a_linear_drift_cancels_over_full_latin_squares(k: int, rounds: int) -> None:
    """Null patches on a machine that slows 1 % a run: the Latin-square order leaves no patch ahead or behind."""
    values: list[list[float | None]] = [[None] * rounds for _ in range(k)]
    t = 0
    for rnd in range(rounds):
        for arm in round_order(rnd, k):
            values[arm][rnd] = 100.0 * (1 - 0.01 * t)
            t += 1
    for arm in range(1, k):
        est = paired(values[arm], values[0], "maximize")
        assert abs(est.gain) < 0.002 and est.lo <= 0 <= est.hi, (arm, est)
