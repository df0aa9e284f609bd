"""A pick among arms its runs cannot tell apart reads high by selection: its gain is pulled toward theirs."""

from __future__ import annotations

import numpy as np
import pytest

from flagopt.stats import ArmEstimate, shrunk_for_selection


def arm(gain: float, se: float = 0.005) -> ArmEstimate:
    return ArmEstimate(gain=gain, lo=gain - 2 * se, hi=gain + 2 * se, n=3, sigma=0.01, se=se)


def test_a_pick_among_equal_arms_is_read_at_their_pooled_mean_with_its_own_width():
    arms = [arm(g) for g in (0.040, 0.043, 0.045, 0.048)]
    pulled = shrunk_for_selection(arms, 3)
    assert pulled.gain == pytest.approx(0.044)
    assert pulled.hi - pulled.lo == pytest.approx(arms[3].hi - arms[3].lo)  # the width is the arm's own
    assert (pulled.n, pulled.se) == (arms[3].n, arms[3].se)


def test_arms_that_truly_differ_keep_their_lead():
    pulled = shrunk_for_selection([arm(0.0), arm(0.01), arm(0.06)], 2)
    assert 0.058 < pulled.gain < 0.06


def test_a_pick_is_never_raised_and_a_lone_arm_is_left_alone():
    arms = [arm(0.02), arm(0.05), arm(0.051)]
    assert shrunk_for_selection(arms, 0) == arms[0]  # picked on other grounds, below the others: its own reading
    assert shrunk_for_selection([arm(0.05)], 0) == arm(0.05)
    assert shrunk_for_selection([arm(0.05), arm(0.04, se=float("inf"))], 0) == arm(0.05)


def test_the_pulled_claim_of_the_highest_of_equal_arms_is_unbiased_and_covers_as_often_as_it_says():
    # Eight arms of the same true +3.8 %, each read with its own noise: the highest reading is +1.4 standard errors
    # high on average; pulled toward the others it is not, and its interval (its own width) covers the truth.
    rng = np.random.default_rng(0)
    truth, se, raw, pulled, covered = 0.038, 0.005, [], [], 0
    for _ in range(2000):
        arms = [arm(g, se) for g in truth + se * rng.standard_normal(8)]
        pick = int(np.argmax([a.gain for a in arms]))
        est = shrunk_for_selection(arms, pick)
        raw.append(arms[pick].gain - truth)
        pulled.append(est.gain - truth)
        covered += est.lo <= truth <= est.hi
    assert np.mean(raw) > 1.2 * se
    assert abs(np.mean(pulled)) < 0.3 * se
    assert covered / 2000 > 0.95
