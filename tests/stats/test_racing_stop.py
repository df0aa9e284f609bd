from __future__ import annotations

import numpy as np

from flagopt.stats import (
    ArmEstimate,
    Run,
    estimate_arm,
    evaluate_stop,
    needs_control,
    next_to_sample,
    win_confidence,
)


def arm(gain: float, half: float, n: int, df: float = 10.0) -> ArmEstimate:
    from scipy import stats as sps

    se = half / float(sps.t.ppf(0.975, df))
    return ArmEstimate(gain=gain, lo=gain - half, hi=gain + half, n=n, sigma=0.01, se=se, df=df)


def test_next_to_sample_picks_the_arm_whose_interval_straddles_the_target() -> None:
    arms = {
        "clear-winner": arm(0.08, 0.01, 5),
        "straddler": arm(0.025, 0.02, 2),
        "clear-loser": arm(-0.03, 0.015, 2),
        "far-below-once": arm(-0.01, 0.025, 1),
    }
    assert next_to_sample(arms, target=0.02) == "straddler"


def test_next_to_sample_prefers_the_closest_call_and_respects_max_runs() -> None:
    arms = {"close": arm(0.021, 0.02, 3), "wide": arm(0.035, 0.03, 3)}
    assert next_to_sample(arms, target=0.02) == "close"
    assert next_to_sample(arms, target=0.02, max_runs=3) is None


def test_next_to_sample_confirms_a_single_promising_run_even_if_its_interval_clears_the_target() -> None:
    arms = {"lucky": arm(0.09, 0.01, 1), "decided": arm(-0.05, 0.01, 4)}
    assert next_to_sample(arms, target=0.05, min_runs=2) == "lucky"
    assert next_to_sample(arms, target=0.05, min_runs=1) is None


def test_next_to_sample_considers_every_target() -> None:
    arms = {"above-null": arm(0.045, 0.01, 4)}  # decided for 0.02, open for 0.05
    assert next_to_sample(arms, target=0.02) is None
    assert next_to_sample(arms, target=(0.02, 0.05)) == "above-null"


def test_stop_fires_for_a_confirmed_winner() -> None:
    arms = {"tree": arm(0.10, 0.015, 5), "other": arm(0.01, 0.02, 2)}
    stop = evaluate_stop(arms, win=0.05, n_distinct=6, trials_used=20, max_trials=100)
    assert stop is not None and stop.reason == "win" and stop.arm == "tree"


def test_win_needs_the_bonferroni_corrected_bound() -> None:
    # lower bound 0.056 at 95 % but not once ten raced arms share the error rate
    arms = {"edge": arm(0.070, 0.014, 4), **{f"n{i}": arm(0.0, 0.02, 2) for i in range(9)}}
    assert arms["edge"].lo >= 0.05
    assert evaluate_stop(arms, win=0.05, n_distinct=10, trials_used=30, max_trials=100) is None
    assert win_confidence(0.95, 10) == 0.995


def test_stop_fires_for_a_negative_finding_only_when_nothing_promising_is_open() -> None:
    arms = {f"p{i}": arm(-0.01 + 0.001 * i, 0.02, 1) for i in range(25)}
    stop = evaluate_stop(arms, null_gain=0.02, max_null=25, n_distinct=25, trials_used=40, max_trials=200)
    assert stop is not None and stop.reason == "null"
    open_arms = {**arms, "maybe": arm(0.03, 0.03, 2)}
    assert evaluate_stop(open_arms, null_gain=0.02, max_null=25, n_distinct=26, trials_used=41, max_trials=200) is None
    too_few = dict(list(arms.items())[:10])
    assert evaluate_stop(too_few, null_gain=0.02, max_null=25, n_distinct=10, trials_used=20, max_trials=200) is None


def test_stop_fires_for_the_budget_and_names_the_best_seen() -> None:
    arms = {"a": arm(0.01, 0.02, 2), "b": arm(0.03, 0.02, 3)}
    stop = evaluate_stop(arms, n_distinct=2, trials_used=50, max_trials=50)
    assert stop is not None and stop.reason == "budget" and stop.arm == "b"
    assert evaluate_stop(arms, n_distinct=2, trials_used=49, max_trials=50) is None


def test_racing_a_true_ten_percent_winner_stops_with_it() -> None:
    """End to end on plain data: interleave baselines, race the candidates, stop on the winner."""
    rng = np.random.default_rng(1)
    truth = {"tree": 0.10, "ring": 0.0, "nvls": 0.01}
    level = lambda t: 50_000.0 * (1.0 + 0.02 * t / 60)  # noqa: E731
    base: list[Run] = []
    runs: dict[str, list[Run]] = {k: [] for k in truth}
    t = 0
    for name in truth:  # screening: one run each between controls
        base.append(Run(t=t, value=level(t) * (1 + 0.01 * rng.standard_normal())))
        runs[name].append(Run(t=t + 1, value=level(t + 1) * (1 + truth[name]) * (1 + 0.01 * rng.standard_normal())))
        t += 2
    stop = None
    while stop is None and t < 200:
        base.append(Run(t=t, value=level(t) * (1 + 0.01 * rng.standard_normal())))
        t += 1
        arms = {k: estimate_arm(v, base) for k, v in runs.items()}
        stop = evaluate_stop(arms, n_distinct=3, trials_used=t, max_trials=200)
        pick = next_to_sample(arms, target=(0.02, 0.05))
        if pick is None:
            break
        runs[pick].append(Run(t=t, value=level(t) * (1 + truth[pick]) * (1 + 0.01 * rng.standard_normal())))
        t += 1
    assert stop is not None and stop.reason == "win" and stop.arm == "tree"
    assert len(runs["ring"]) <= 2  # repeats went where they change the decision


def test_repeats_against_the_same_controls_ask_for_a_control_next() -> None:
    rng = np.random.default_rng(9)
    noisy = lambda t, g=0.0: Run(t=t, value=50_000.0 * (1 + g) * (1 + 0.01 * rng.standard_normal()))  # noqa: E731
    base = [noisy(0), noisy(10)]
    arm_runs = [noisy(t, 0.03) for t in range(1, 9)]  # eight repeats, all between the same two controls
    crowded = estimate_arm(arm_runs, base)
    assert needs_control(crowded)
    paired = estimate_arm(arm_runs, [*base, *(noisy(t + 0.5) for t in range(1, 9))])  # A-B-A-B
    assert not needs_control(paired)
    assert paired.se < crowded.se


def test_an_arm_well_below_the_target_is_not_raced() -> None:
    arms = {"meh": arm(0.004, 0.02, 3), "close": arm(0.015, 0.02, 3)}
    assert next_to_sample(arms, target=0.02) == "close"
    assert next_to_sample({"meh": arms["meh"]}, target=0.02) is None
