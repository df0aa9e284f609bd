"""Each slot is a block: gains, noise and drift are measured within it, so an offset between node groups is
neither a gain nor noise."""

from __future__ import annotations

import numpy as np
import pytest

from flagopt.stats import Run, baseline_at, estimate_arm, gains, noise_estimate, verdict


def two_slots(rng: np.random.Generator, *, slow: float = 0.97, sigma: float = 0.004, n: int = 8) -> list[Run]:
    """Baselines alternating between slot a (level 100) and slot b (``slow`` times that), each with its drift."""
    runs = []
    for i in range(n):
        t = float(2 * i)
        runs.append(Run(t=t, value=100.0 * (1 + 0.001 * t) * (1 + sigma * rng.standard_normal()), block="a"))
        runs.append(Run(t=t + 1, value=100.0 * slow * (1 - 0.002 * t) * (1 + sigma * rng.standard_normal()),
                        block="b"))
    return runs


def test_an_arm_run_only_on_the_slow_slot_is_not_worse() -> None:
    rng = np.random.default_rng(1)
    base = two_slots(rng)
    # a configuration with no effect, run three times on the slow slot only
    arm = [Run(t=t, value=100.0 * 0.97 * (1 - 0.002 * t) * (1 + 0.004 * rng.standard_normal()), block="b")
           for t in (4.5, 8.5, 12.5)]
    est = estimate_arm(arm, base)
    assert abs(est.gain) < 0.01 and est.lo < 0 < est.hi
    assert verdict(est, min_effect=0.01) != "worse"
    # pooled with the fast slot's baselines it would look 3 % worse: the block is what removes that
    unblocked = estimate_arm([Run(t=r.t, value=r.value) for r in arm], [Run(t=r.t, value=r.value) for r in base])
    assert unblocked.gain < -0.01


def test_a_real_gain_is_measured_on_either_slot() -> None:
    rng = np.random.default_rng(2)
    base = two_slots(rng)
    fast = [Run(t=t, value=106.0 * (1 + 0.001 * t), block="a") for t in (2.5, 6.5)]
    slow = [Run(t=t, value=106.0 * 0.97 * (1 - 0.002 * t), block="b") for t in (4.5, 10.5)]
    for g in gains(fast + slow, base):
        assert g == pytest.approx(0.06, abs=0.015)


def test_offset_between_slots_is_not_noise() -> None:
    rng = np.random.default_rng(3)
    base = two_slots(rng, slow=0.95, sigma=0.004, n=10)
    est = noise_estimate(base)
    assert est.sigma < 0.008  # the 5 % offset would make it > 2 % if slots were differenced together
    assert est.df == pytest.approx(2 * (10 - 1) - 1)  # differences within each slot, one trend slope for all


def test_level_of_a_slot_without_baselines_falls_back_to_every_baseline() -> None:
    base = [Run(t=0, value=100.0, block="a"), Run(t=2, value=100.0, block="a")]
    assert baseline_at(base, 1.0, sigma=0.0, block="c").value == pytest.approx(100.0)
    assert baseline_at(base + [Run(t=1, value=90.0, block="c")], 1.0, sigma=0.0, block="c").value == pytest.approx(90.0)
