from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from flagopt.stats import ArmEstimate, Run, estimate_arm, verdict

BASE_TIMES = range(0, 41, 4)


def test_a_real_six_percent_effect_is_confirmed_with_an_interval_around_it(studies: SimpleNamespace) -> None:
    rng = np.random.default_rng(2024)
    base, arm = studies.study(
        rng, studies.linear_level(0.02, 40), gain=0.06, noise=0.01, baseline_times=BASE_TIMES, arm_times=[9, 17, 25]
    )
    est = estimate_arm(arm, base)
    assert verdict(est, min_effect=0.01, min_runs=2) == "better"
    assert est.lo <= 0.06 <= est.hi
    assert est.n == 3


def test_six_percent_effects_are_covered_at_the_stated_confidence(studies: SimpleNamespace) -> None:
    covered, better = 0, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        base, arm = studies.study(
            rng, studies.linear_level(0.02, 40), gain=0.06, noise=0.01, baseline_times=BASE_TIMES, arm_times=[9, 17, 25]
        )
        est = estimate_arm(arm, base)
        covered += est.lo <= 0.06 <= est.hi
        better += verdict(est, min_effect=0.01) == "better"
    assert covered >= 0.92 * 200
    assert better >= 0.95 * 200


def test_no_effect_under_linear_drift_is_rarely_a_false_winner(studies: SimpleNamespace) -> None:
    level = studies.linear_level(0.03, 40)
    false_winners = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        arm_times = sorted(rng.choice(np.arange(1, 40), size=3, replace=False))
        base, arm = studies.study(rng, level, gain=0.0, noise=0.01, baseline_times=BASE_TIMES, arm_times=arm_times)
        false_winners += verdict(estimate_arm(arm, base), min_effect=0.01) == "better"
    assert false_winners <= 0.05 * 200


def test_late_null_runs_win_without_drift_correction_but_not_with_it(studies: SimpleNamespace) -> None:
    """Comparing late runs with the study-average baseline crowns the drift; interpolation does not."""
    level = studies.linear_level(0.03, 40)
    naive_winners, corrected_winners = 0, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        base, arm = studies.study(rng, level, gain=0.0, noise=0.01, baseline_times=BASE_TIMES, arm_times=[36, 38, 39])
        average = float(np.mean([r.value for r in base]))
        naive_winners += float(np.mean([r.value for r in arm])) / average - 1.0 > 0.01
        corrected_winners += verdict(estimate_arm(arm, base), min_effect=0.01) == "better"
    assert naive_winners > 0.5 * 200
    assert corrected_winners <= 0.05 * 200


def test_a_run_after_the_last_control_widens_the_interval(studies: SimpleNamespace) -> None:
    rng = np.random.default_rng(7)
    base, arm = studies.study(
        rng, studies.linear_level(0.03, 40), gain=0.0, noise=0.01, baseline_times=range(0, 21, 4), arm_times=[22, 24]
    )
    inside = estimate_arm([Run(t=r.t - 10, value=r.value) for r in arm], base)
    beyond = estimate_arm(arm, base)
    assert (beyond.hi - beyond.lo) > (inside.hi - inside.lo)


def test_verdicts_cover_the_four_outcomes() -> None:
    def est(gain: float, lo: float, hi: float, n: int = 4) -> ArmEstimate:
        return ArmEstimate(gain=gain, lo=lo, hi=hi, n=n, sigma=0.01)

    assert verdict(est(0.03, 0.01, 0.05), min_effect=0.01) == "better"
    assert verdict(est(0.005, 0.001, 0.009), min_effect=0.01) == "same"  # significant but negligible
    assert verdict(est(-0.04, -0.06, -0.02), min_effect=0.01) == "worse"
    assert verdict(est(0.02, -0.01, 0.05), min_effect=0.01) == "unknown"
    assert verdict(est(0.03, 0.01, 0.05, n=1), min_effect=0.01, min_runs=2) == "unknown"


def test_the_noise_floor_keeps_lucky_agreeing_baselines_from_shrinking_the_interval() -> None:
    base = [Run(t=t, value=50_000.0) for t in range(0, 13, 4)]  # four identical baselines: sigma estimate 0
    arm = [Run(t=2, value=50_400.0), Run(t=6, value=50_400.0)]
    floored = estimate_arm(arm, base)
    bare = estimate_arm(arm, base, noise_floor=None)
    assert floored.sigma >= 0.003
    assert floored.lo < 0 < 0.008 < floored.hi
    assert bare.hi - bare.lo < floored.hi - floored.lo
