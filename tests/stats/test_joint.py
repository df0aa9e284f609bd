"""Arms estimated against one drift curve fitted to every run (flagopt.stats.estimate_arms)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flagopt.stats import Run, estimate_arm, estimate_arms


def _study(rng: np.random.Generator, *, sigma: float, drift: float = 0.02, sine: float = 0.004, n: int = 48,
           every: int = 9, gains: dict[str, float] | None = None) -> tuple[list[Run], dict[str, list[Run]]]:
    """A race as flagopt runs it: a control every ``every`` runs, three configurations repeated in between."""
    gains = gains or {"a": 0.06, "b": 0.03, "c": 0.0}
    names = list(gains)
    base: list[Run] = []
    arms: dict[str, list[Run]] = {k: [] for k in names}
    for t in range(n):
        level = 1000.0 * (1.0 + drift * t / n + sine * math.sin(2 * math.pi * t / 25))
        noise = 1.0 + sigma * rng.standard_normal()
        if t % every == 0:
            base.append(Run(t=t, value=level * noise))
        else:
            key = names[t % len(names)]
            arms[key].append(Run(t=t, value=level * (1.0 + gains[key]) * noise))
    return base, arms


def test_intervals_cover_the_truth_and_are_narrower_than_interpolation():
    """Over 200 simulated races with drift, the 95 % intervals cover the truth in at least 90 % of arms, and are
    narrower than those from the two controls around each run (whose noise lands on every run between them)."""
    rng = np.random.default_rng(7)
    covered = total = 0
    joint_se, pair_se = [], []
    for _ in range(200):
        base, arms = _study(rng, sigma=0.008)
        joint = estimate_arms(arms, base)
        truth = {"a": 0.06, "b": 0.03, "c": 0.0}
        for key, est in joint.items():
            covered += est.lo <= truth[key] <= est.hi
            total += 1
            joint_se.append(est.se)
            pair_se.append(estimate_arm(arms[key], base).se)
    assert covered / total >= 0.90
    assert np.median(joint_se) < np.median(pair_se)


def test_a_noisy_control_does_not_skew_the_runs_after_it():
    """One control 2.4 % high and an arm repeated only between it and the next (a race in one block): the runs
    interpolated against it read low; the runs of the other arms around it pin the drift curve (50 studies)."""
    joint_err, pair_err = [], []
    for seed in range(50):
        rng = np.random.default_rng(seed)
        base: list[Run] = []
        arms: dict[str, list[Run]] = {"a": [], "b": [], "c": []}
        for t in range(49):
            level = 1000.0 * (1 + 0.02 * t / 49) * (1 + 0.005 * rng.standard_normal())
            if t % 8 == 0:
                base.append(Run(t=t, value=level * (1.024 if t == 8 else 1.0)))
            elif 9 <= t <= 15 and t % 2:
                arms["a"].append(Run(t=t, value=level * 1.05))
            else:
                arms["b" if t % 2 else "c"].append(Run(t=t, value=level * (1.02 if t % 2 else 1.0)))
        joint_err.append(abs(estimate_arms(arms, base)["a"].gain - 0.05))
        pair_err.append(abs(estimate_arm(arms["a"], base).gain - 0.05))
    assert np.mean(joint_err) < 0.006
    assert np.mean(joint_err) < 0.5 * np.mean(pair_err)


def test_a_steady_drift_does_not_make_late_runs_look_better():
    """A drift of +4 % over the study and an arm run only after the last control: the trend carries the level on
    (a flat level read the drift as the arm's gain)."""
    base = [Run(t=t, value=1000.0 * (1 + 0.04 * t / 40)) for t in range(0, 33, 4)]
    other = [Run(t=t, value=1000.0 * (1 + 0.04 * t / 40) * 1.02) for t in (1, 5, 9, 13, 17, 21, 25, 29, 34, 38)]
    late = [Run(t=t, value=1000.0 * (1 + 0.04 * t / 40) * 1.05) for t in (35, 36, 37, 39)]
    est = estimate_arms({"late": late, "other": other}, base)["late"]
    assert est.gain == pytest.approx(0.05, abs=0.003)


def test_a_quiet_job_gets_intervals_of_its_own_noise():
    """Runs that repeat to 0.2 %: four runs of an arm give an interval of a few tenths of a percent (the 0.3 %
    noise floor still holds), not the +-1 % of a drift fit with few degrees of freedom."""
    rng = np.random.default_rng(11)
    base, arms = _study(rng, sigma=0.002, n=30, every=6)
    est = estimate_arms(arms, base)["a"]
    assert est.sigma == pytest.approx(0.003)  # the floor: the residuals said less
    assert (est.hi - est.lo) / 2 < 0.005
    assert est.hi - est.lo < estimate_arm(arms["a"], base).hi - estimate_arm(arms["a"], base).lo
    assert est.lo <= 0.06 <= est.hi


def test_arms_without_runs_and_a_slot_without_controls():
    """An arm without a measured run gets no estimate; a run on a slot with no control yet is measured against the
    slot with most controls."""
    base = [Run(t=0, value=100.0), Run(t=4, value=100.2), Run(t=8, value=99.9)]
    arms = {"none": [Run(t=1, value=0.0)], "new-slot": [Run(t=2, value=103.0, block="b"), Run(t=5, value=103.1,
                                                                                                 block="b")]}
    out = estimate_arms(arms, base)
    assert out["none"].n == 0 and math.isnan(out["none"].gain)
    assert out["new-slot"].gain == pytest.approx(0.03, abs=0.003)
    with pytest.raises(ValueError, match="baseline"):
        estimate_arms(arms, [])


def test_a_pause_in_the_study_does_not_stiffen_the_drift_curve():
    """A study resumed the next day: the runs before the pause keep a knot every few runs, so an arm measured where
    the level bent reads as it would without the pause (knots evenly in time put them all in the night)."""
    def runs(gap: float) -> tuple[list[Run], dict[str, list[Run]]]:
        base, arms = [], {"a": [], "b": []}
        for i in range(60):
            t = float(i) if i < 40 else i + gap
            level = 1000.0 * (1 + 0.006 * math.sin(2 * math.pi * i / 16))
            if i % 5 == 0:
                base.append(Run(t=t, value=level))
            else:
                key = "a" if 2 <= i <= 6 else "b"
                arms[key].append(Run(t=t, value=level * (1.04 if key == "a" else 1.01)))
        return base, arms

    base, arms = runs(0.0)
    together = estimate_arms(arms, base)["a"]
    base, arms = runs(50_000.0)
    paused = estimate_arms(arms, base)["a"]
    assert together.gain == pytest.approx(0.04, abs=0.004)
    assert paused.gain == pytest.approx(together.gain, abs=0.001)
