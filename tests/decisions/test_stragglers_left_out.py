"""A straggling control or repeat is left out of the arms' estimates and the drift; its record stays."""

from __future__ import annotations

import numpy as np

from flagopt.decide import RunRecord, arms_of, baseline_runs
from flagopt.space import NoiseSpec


def _records(slow: set[int]) -> list[RunRecord]:
    """Controls every 7 runs and four configurations at +2 % in turn between them, 1 % noise; runs in ``slow`` 6 % slow."""
    rng = np.random.default_rng(0)
    out = []
    for number in range(42):
        control = number % 7 == 0
        key = "" if control else f"c{number % 4}"
        value = 100.0 * (1.0 if control else 1.02) * (1 + 0.01 * rng.standard_normal()) * (0.94 if number in slow else 1)
        out.append(RunRecord(number, "baseline-deployed" if control else "probe", key or "baseline-deployed", key, "ok",
                             value, float(number), None, attrs={}))
    return out


def test_a_straggling_control_is_left_out_of_the_drift_and_every_arm_s_estimate() -> None:
    plain, rough = _records(set()), _records({21})
    assert len(baseline_runs(rough)) == len(baseline_runs(plain)) - 1  # control 21 left out, its record kept
    error = {name: sum(abs(a.estimate.gain - 0.02) for a in arms_of(recs, NoiseSpec()))
             for name, recs in (("plain", plain), ("rough", rough))}
    assert error["rough"] < error["plain"] + 0.004  # the slow control did not drag the arms up


def test_a_straggling_repeat_leaves_its_arm_one_run_short() -> None:
    plain = {a.config_key: a.n for a in arms_of(_records(set()), NoiseSpec())}
    rough = {a.config_key: a for a in arms_of(_records({13}), NoiseSpec())}  # run 13 is one of c1's
    assert rough["c1"].n == plain["c1"] - 1 and 13 not in {r.number for r in rough["c1"].runs}
    assert all(rough[k].n == plain[k] for k in ("c0", "c2", "c3"))


def test_a_verdict_counts_the_runs_it_left_out_as_stragglers(tmp_path) -> None:
    from flagopt.decide import Planner
    from tests.decisions.records import space_of
    planner = Planner(space_of(tmp_path, """
        name: s
        command: [python, -c, pass]
        params:
          a: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
    """))
    plain, rough = planner.noise_summary(_records(set())), planner.noise_summary(_records({21}))
    assert "stragglers" not in plain and rough["stragglers"] == 1.0
    assert rough["baseline_runs"] == plain["baseline_runs"] - 1


def test_a_win_whose_runs_after_its_choice_read_below_its_confirmation_says_so() -> None:
    # c1 confirmed at +8 % on its fresh runs; its two runs after the choice (phase settle) read +8 % (plain) or 5 %
    # slower (a slow node on both, back to back: the straggler rule cannot tell them from the configuration).
    from dataclasses import replace

    from flagopt.decide._plan import settle_doubt

    def records(slow: float) -> list[RunRecord]:
        out = _records(set())
        out = [replace(r, steady=r.steady * 1.06 / 1.02) if r.config_key == "c1" else r for r in out]
        for number in (43, 44):
            out.append(RunRecord(number, "repeat", "c1", "c1", "ok", 108.0 * slow, float(number), None,
                                 attrs={"phase": "settle"}))
        out.append(RunRecord(45, "baseline-deployed", "baseline-deployed", "", "ok", 100.0, 45.0, None, attrs={}))
        return out

    arm = {a.config_key: a for a in arms_of(records(0.95), NoiseSpec())}["c1"]
    assert arm.settled is not None and arm.settled.hi < arm.claim.lo
    assert "slow node" in settle_doubt(arm) and "flagopt ab" in settle_doubt(arm)
    plain = {a.config_key: a for a in arms_of(records(1.0), NoiseSpec())}["c1"]
    assert plain.settled is not None and settle_doubt(plain) == ""
