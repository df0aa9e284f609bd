"""Stragglers: runs far slower than the other runs say they should be are found, and only those."""

from __future__ import annotations

import numpy as np

from flagopt.stats import Run, estimate_arms, slow_runs


def _study(seed: int, *, slow_control: int | None = None, slow_repeat: bool = False):
    rng = np.random.default_rng(seed)
    level = lambda t: 100.0 * (1 + 0.0004 * t)  # noqa: E731 (a 2 % drift over the study)
    base = [Run(t=t, value=level(t) * (1 + 0.01 * rng.standard_normal())) for t in range(0, 50, 7)]
    arms = {f"a{k}": [Run(t=t, value=level(t) * (1.02 + 0.01 * rng.standard_normal())) for t in (k + 1, k + 20, k + 40)]
            for k in range(4)}
    arms["once"] = [Run(t=5.5, value=level(5.5) * 0.94)]  # a slow configuration measured once: never a straggler
    if slow_control is not None:
        r = base[slow_control]
        base[slow_control] = Run(t=r.t, value=r.value * 0.95)
    if slow_repeat:
        r = arms["a2"][1]
        arms["a2"][1] = Run(t=r.t, value=r.value * 0.93)
    return arms, base


def test_a_slow_control_or_a_slow_repeat_is_found_and_nothing_else() -> None:
    found = wrong = 0
    for seed in range(20):
        for control, repeat in ((3, False), (None, True)):
            arms, base = _study(seed, slow_control=control, slow_repeat=repeat)
            slow_base, slow = slow_runs(arms, base)
            flagged = [("control", i) for i, s in enumerate(slow_base) if s]
            flagged += [(k, i) for k, v in slow.items() for i, s in enumerate(v) if s]
            truth = ("control", 3) if control is not None else ("a2", 1)
            found += truth in flagged
            wrong += len([f for f in flagged if f != truth])
    assert found >= 30 and wrong <= 1  # of 40 stragglers 5 % (control) and 7 % (repeat) slow at 1 % run noise


def test_gaussian_runs_have_no_stragglers() -> None:
    flagged = 0
    for seed in range(40):
        arms, base = _study(seed)
        slow_base, slow = slow_runs(arms, base)
        flagged += sum(slow_base) + sum(sum(v) for v in slow.values())
    assert flagged <= 1  # about one run in 4,300 at 3.5 robust sigmas; 40 studies of 27 runs


def test_leaving_the_straggler_out_brings_the_gains_back_to_the_truth() -> None:
    dragged = fixed = 0.0
    for seed in range(20):
        arms, base = _study(seed, slow_control=3)
        slow_base, _ = slow_runs(arms, base)
        kept = [r for r, s in zip(base, slow_base) if not s]
        for key in ("a0", "a1", "a2", "a3"):
            dragged += abs(estimate_arms(arms, base)[key].gain - 0.02)
            fixed += abs(estimate_arms(arms, kept)[key].gain - 0.02)
    assert fixed < 0.8 * dragged
