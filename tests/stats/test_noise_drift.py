from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as sps

from flagopt.stats import Run, baseline_at, drift_interval, estimate_arm, gains, run_noise


EVERY_4 = range(0, 41, 4)


def test_run_noise_is_robust_to_drift(studies: SimpleNamespace) -> None:
    estimates, naive = [], []
    for seed in range(50):
        rng = np.random.default_rng(seed)
        level = lambda t: 50_000.0 * (1.0 + 0.03 * t / 40 + 0.005 * np.sin(t / 9))  # noqa: E731
        base, _ = studies.study(rng, level, gain=0.0, noise=0.008, baseline_times=EVERY_4, arm_times=[])
        estimates.append(run_noise(base))
        values = np.array([r.value for r in base])
        naive.append(float(np.std(values / values.mean(), ddof=1)))
    assert np.median(estimates) == pytest.approx(0.008, rel=0.2)
    # the plain spread mixes the 3 % drift into the noise
    assert np.median(naive) > 1.2 * 0.008


def test_run_noise_falls_back_to_step_noise_with_one_baseline() -> None:
    only = [Run(t=0, value=50_000.0, step_std=500.0, n_steps=4)]
    assert run_noise(only) == pytest.approx(500.0 / 50_000.0 / 2.0)


def test_baseline_at_interpolates_between_neighbours_and_grows_se_beyond(studies: SimpleNamespace) -> None:
    rng = np.random.default_rng(3)
    base, _ = studies.study(
        rng, studies.linear_level(0.03, 40), gain=0.0, noise=0.005, baseline_times=EVERY_4, arm_times=[]
    )
    inside = baseline_at(base, 10.0)
    lo, hi = base[2], base[3]  # launches 8 and 12
    assert min(lo.value, hi.value) <= inside.value <= max(lo.value, hi.value)
    assert inside.value == pytest.approx(0.5 * (lo.value + hi.value))
    near, far = baseline_at(base, 41.0), baseline_at(base, 60.0)
    assert far.se > near.se > 0


def test_drift_correction_recovers_a_gain_the_uncorrected_comparison_misses(studies: SimpleNamespace) -> None:
    rng = np.random.default_rng(11)
    level = studies.linear_level(0.04, 40)
    # the arm ran late in the study, when the drifting baseline was ~3 % above its average
    base, arm = studies.study(rng, level, gain=0.03, noise=0.004, baseline_times=EVERY_4, arm_times=[33, 35, 37, 39])
    corrected = np.mean(gains(arm, base))
    est = estimate_arm(arm, base)
    assert est.lo <= 0.03 <= est.hi
    assert corrected == pytest.approx(0.03, abs=0.006)
    arm_v, base_v = np.array([r.value for r in arm]), np.array([r.value for r in base])
    # uncorrected: Welch's t on raw values against all baselines
    ci = sps.ttest_ind(arm_v, base_v, equal_var=False).confidence_interval(0.95)
    assert not (ci.low / base_v.mean() <= 0.03 <= ci.high / base_v.mean())


def test_drift_interval_shortens_when_the_baseline_moves(studies: SimpleNamespace) -> None:
    rng = np.random.default_rng(5)
    calm, _ = studies.study(rng, studies.linear_level(0.0, 40), gain=0.0, noise=0.005, baseline_times=EVERY_4)
    moving, _ = studies.study(rng, studies.linear_level(0.3, 40), gain=0.0, noise=0.005, baseline_times=EVERY_4)
    assert drift_interval(calm, k_min=2, k_max=8) > drift_interval(moving, k_min=2, k_max=8)
    assert drift_interval(moving, k_min=2, k_max=8) == 2
    assert drift_interval(calm[:2]) == 2  # not measured yet: check often
