"""The pure parts of `flagopt ab`: the Latin-square order, the paired interval, the agreement, the summary."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from flagopt.ab import agreement, arm_lines, paired, round_order, summarize, williams_rows


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


def _rounds(values: list[tuple[float, float]], **stamps: object) -> list[dict]:
    """A, B per round, each run with the ``stamps`` given for it as ``r{round}{arm}={...}``."""
    runs = []
    for rnd, (a, b) in enumerate(values):
        for arm, value in ((0, a), (1, b)):
            runs.append({"round": rnd, "arm": arm, "status": "ok", "steady": value, "session": "s1",
                         **(stamps.get(f"r{rnd}{arm}") or {})})
    return runs


def test_a_round_finished_in_another_session_is_flagged_and_left_out_of_the_second_estimate() -> None:
    values = [(100.0, 102.0), (100.0, 109.0), (100.0, 102.2), (100.0, 101.8)]  # round 2 paired two machines
    doc = {"pairs": 4, "metric": {"direction": "maximize"}, "arms": [{"name": "A", "label": "deployed"},
                                                                      {"name": "B", "label": "p.env.sh"}],
           "runs": _rounds(values, r11={"session": "s2"}, r20={"session": "s2"}, r21={"session": "s2"},
                           r30={"session": "s2"}, r31={"session": "s2"})}
    doc["summary"] = summarize(doc)
    assert doc["summary"]["split_rounds"] == [{"round": 1, "sessions": 2, "hosts": []}]
    b = doc["summary"]["arms"][1]
    assert b["vs_deployed"]["pairs"] == 4 and b["vs_deployed_whole_rounds"]["pairs"] == 3
    assert b["vs_deployed_whole_rounds"]["gain"] == pytest.approx(0.02, abs=0.001)
    line = arm_lines(doc)[-1]
    assert line.startswith("warning: round 2 ran in more than one session") and "B +2.00 %" in line


def test_runs_on_two_hosts_in_one_round_are_flagged_and_one_session_on_one_host_is_not() -> None:
    doc = {"pairs": 2, "metric": {"direction": "maximize"}, "arms": [{"name": "A", "label": "deployed"},
                                                                      {"name": "B", "label": "p.env.sh"}]}
    doc["runs"] = _rounds([(100.0, 102.0), (100.0, 102.1)], r00={"host": "n1"}, r01={"host": "n2"},
                          r10={"host": "n1"}, r11={"host": "n1"})
    assert summarize(doc)["split_rounds"] == [{"round": 0, "sessions": 1, "hosts": ["n1", "n2"]}]
    doc["runs"] = _rounds([(100.0, 102.0), (100.0, 102.1)])
    summary = summarize(doc)
    assert summary["split_rounds"] == [] and "vs_deployed_whole_rounds" not in summary["arms"][1]
    assert not any(line.startswith("warning") for line in arm_lines({**doc, "summary": summary}))


def test_a_record_without_session_stamps_splits_at_the_run_the_driver_cancelled() -> None:
    """Records written before runs carried their session: the driver's cancel marks where the resume began."""
    runs = [{"round": 0, "arm": 0, "status": "ok", "steady": 100.0},
            {"round": 0, "arm": 1, "status": "ok", "steady": 102.0},
            {"round": 1, "arm": 1, "status": "ok", "steady": 102.0},
            {"round": 1, "arm": 0, "status": "cancelled", "cancelled_by": "driver"},
            {"round": 1, "arm": 0, "status": "ok", "steady": 100.0},
            {"round": 2, "arm": 0, "status": "ok", "steady": 100.0},
            {"round": 2, "arm": 1, "status": "ok", "steady": 102.0}]
    doc = {"pairs": 3, "metric": {"direction": "maximize"}, "runs": runs,
           "arms": [{"name": "A", "label": "deployed"}, {"name": "B", "label": "p.env.sh"}]}
    assert summarize(doc)["split_rounds"] == [{"round": 1, "sessions": 2, "hosts": []}]


def _pairs_doc(rows: list[list[float]], run_sigma: float | None) -> dict:
    """Arm ``i``'s value per round is ``rows[i]``; the study's run noise, if any, is ``run_sigma``."""
    arms = [{"name": chr(ord("A") + i), "label": "deployed" if i == 0 else f"p{i}.env.sh"} for i in range(len(rows))]
    runs = [{"round": rnd, "arm": arm, "status": "ok", "steady": v} for arm, row in enumerate(rows) for rnd, v in enumerate(row)]
    doc = {"pairs": len(rows[0]), "metric": {"direction": "maximize"}, "arms": arms, "runs": runs}
    if run_sigma is not None:
        doc["noise"] = {"study": "fsdp", "run_sigma": run_sigma, "controls": 9}
    return doc


def test_a_patch_run_a_slow_node_measured_is_named_and_the_estimate_without_it_is_given() -> None:
    # B pays +3 % in four rounds; its run of round 3 ran on a slow node (5 % low)
    rows = [[100.0, 100.3, 99.8, 100.1, 99.9], [103.1, 103.2, 97.8, 103.0, 103.1]]
    doc = _pairs_doc(rows, 0.003)
    doc["summary"] = summarize(doc)
    assert doc["summary"]["stragglers"] == [{"round": 2, "arm": "B", "reads": pytest.approx(-0.048, abs=0.002)}]
    b = doc["summary"]["arms"][1]
    assert b["vs_deployed"]["pairs"] == 5 and b["verdict"] == "no difference"  # the A/B as planned keeps every run
    kept = b["vs_deployed_without_stragglers"]
    assert kept["pairs"] == 4 and kept["gain"] == pytest.approx(0.03, abs=0.002) and kept["verdict"] == "better"
    line = arm_lines(doc)[-1]
    assert line.startswith("warning: B's run in round 3 read 4.8 % below what B's other rounds say")
    assert "run noise of study fsdp (0.30 % a run)" in line and "without it: B +3.0" in line and "--pairs 7" in line


def test_a_slow_deployed_run_is_named_once_and_takes_its_round_out_of_every_pair() -> None:
    rows = [[100.0, 100.2, 95.1, 99.9], [102.0, 102.1, 102.0, 101.9], [99.9, 100.1, 100.0, 100.2]]
    doc = _pairs_doc(rows, 0.004)
    summary = summarize(doc)
    assert [(s["round"], s["arm"]) for s in summary["stragglers"]] == [(2, "A")]
    assert [a["vs_deployed_without_stragglers"]["pairs"] for a in summary["arms"][1:]] == [3, 3]
    assert summary["arms"][2]["vs_deployed_without_stragglers"]["gain"] == pytest.approx(0.0, abs=0.002)
    assert "A's run in round 3 read" in arm_lines({**doc, "summary": summary})[-1]


def test_no_run_is_named_without_a_study_noise_nor_within_it() -> None:
    slow = [[100.0, 100.3, 99.8, 100.1, 99.9], [103.1, 103.2, 97.8, 103.0, 103.1]]
    summary = summarize(_pairs_doc(slow, None))  # no study: five rounds cannot tell a straggler from noise
    assert "stragglers" not in summary and "vs_deployed_without_stragglers" not in summary["arms"][1]
    # a noisy job (1 % a run): a pair 3 % off the others is within 3.5 sigmas of a pair's noise
    noisy = _pairs_doc([[100.0, 100.3, 99.8, 100.1, 99.9], [103.1, 102.2, 100.1, 103.0, 104.1]], 0.01)
    noisy["summary"] = summarize(noisy)
    assert "stragglers" not in noisy["summary"]
    assert not any(line.startswith("warning") for line in arm_lines(noisy))
