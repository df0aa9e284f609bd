"""The benchmark's metrics on hand-built results: controls, coverage, claimed - true, repeated failures, targets."""

from __future__ import annotations

import pytest

from benchmarks._baselines import RunLog
from benchmarks._metrics import SeedResult, check_targets, failure_reason, repeated_failures, summarise
from flagopt.workloads.sim import load_landscape

AG = "xla_gpu_all_gather_combine_threshold_bytes"
RS = "xla_gpu_enable_pipelined_reduce_scatter"


def result(strategy: str = "flagopt", seed: int = 0, **kw) -> SeedResult:
    base = dict(landscape="fsdp64", strategy=strategy, seed=seed, runs=20, true_gain=0.10, best_gain=0.139,
                claimed_gain=0.11, verdict="win" if strategy == "flagopt" else None, recommends=True)
    return SeedResult(**{**base, **kw})


def test_coverage_and_claim_error_count_claims_only() -> None:
    rs = [result(seed=0, ci=(0.08, 0.12)), result(seed=1, ci=(0.105, 0.12), claimed_gain=0.112),
          result(seed=2, recommends=False, verdict="budget", claimed_gain=0.0, true_gain=0.0, ci=None)]
    s = summarise(rs)[0]
    assert s.claims == 2 and s.coverage == pytest.approx(0.5) and s.coverage_n == 2
    assert s.claim_error_mean == pytest.approx(((0.11 - 0.10) + (0.112 - 0.10)) / 2)
    assert rs[2].covered is None


def test_controls_share_is_the_median_over_seeds() -> None:
    rs = [result(seed=i, runs=20, controls=c) for i, c in enumerate((2, 4, 10))]
    assert summarise(rs)[0].controls_median == pytest.approx(0.2)
    assert summarise([result(strategy="tpe", controls=None)])[0].controls_median is None


def test_failure_reason_names_the_oom_rule_or_the_unknown_flag() -> None:
    cliff = load_landscape("oomcliff")
    assert failure_reason(cliff, {AG: 2**33}) == ("oom", 0)
    assert failure_reason(cliff, {"xla": {f"--{RS}": "true"}, "env": {}, "args": {}}) == ("oom", 1)
    unknown = "xla_gpu_enable_async_collectives"
    assert failure_reason(cliff, {unknown: True}) == ("flag", unknown)
    assert failure_reason(cliff, {AG: 2**31}) is None


def test_repeated_failures_count_after_the_grace_and_never_explain_flakes() -> None:
    cliff = load_landscape("oomcliff")
    ok = RunLog({}, False, True, 1.0)
    log = [RunLog({}, True, True, 1.0),  # a control: never counted
           RunLog({RS: True}, False, False, 1.0, "oom"),  # 1st sampled: seen, inside the grace
           *[ok] * 9,
           RunLog({RS: True}, False, False, 1.0, "oom"),  # 11th sampled: same rule again -> repeated
           RunLog({AG: 2**33}, False, False, 1.0, "oom"),  # a new rule: not repeated
           RunLog({AG: 2**34}, False, False, 1.0, "oom"),  # the same new rule -> repeated
           RunLog({}, False, False, 1.0, "hang"),  # infrastructure: never explained
           RunLog({}, False, False, 1.0, "hang"),
           RunLog({RS: True}, True, False, 1.0, "oom")]  # a control again: not counted
    assert repeated_failures(cliff, log) == (2, 5)
    assert repeated_failures(cliff, log, grace=0) == (2, 15)


def test_targets_follow_the_landscape_kind() -> None:
    win = [result(seed=i, runs=15, true_gain=0.139) for i in range(3)]
    manual = [result(strategy="manual", seed=i, runs=33, true_gain=0.13) for i in range(3)]
    null = [result(landscape="null", seed=i, best_gain=0.0, true_gain=0.0, claimed_gain=0.0, recommends=False,
                   verdict="null", runs=30) for i in range(3)]
    checks = {c.name: c for c in check_targets([*win, *manual, *null])}
    assert checks["fsdp64: win verdict"].met and checks["fsdp64: within 1 % of the true best"].met
    assert checks["fsdp64: median runs <= the manual protocol's"].met
    assert checks["fsdp64: mean regret <= the best other strategy's"].met
    assert not checks["null: a confirmed recommendation of any size"].met  # 3 seeds are not the 50 it needs
    assert checks["null: null verdict within the budget"].met and checks["null: median runs"].met
    below = [result(landscape="below5", seed=i, best_gain=0.038, true_gain=0.02, claimed_gain=0.051)
             for i in range(2)]
    checks = {c.name: c for c in check_targets(below)}
    assert not checks["below5: a +5 % claim"].met and not checks["below5: within 1 % of the true best"].met
