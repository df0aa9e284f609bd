"""The handling table follows the issue's rules."""

from __future__ import annotations

from flagopt.failures import FAILURE_CLASSES, HANDLING, MAX_CHAIN_RETRIES, after_failure, handling_for


def test_every_class_has_a_handling() -> None:
    assert set(HANDLING) == set(FAILURE_CLASSES)


def test_configuration_faults_are_never_retried() -> None:
    assert HANDLING["oom"].retries == 0 and HANDLING["oom"].infeasible and HANDLING["oom"].status == "infeasible"
    flag = HANDLING["unknown-flag"]
    assert flag.retries == 0 and flag.exclude_value and flag.status == "invalid"


def test_infrastructure_flakes_are_retried_then_handled() -> None:
    assert HANDLING["nccl-init"].retries == 3 and not HANDLING["nccl-init"].stop_study
    assert HANDLING["nccl-init"].status == "flake"
    assert HANDLING["coordination-timeout"].retries == 2 and HANDLING["coordination-timeout"].stop_study
    assert HANDLING["node-failure"].stop_study and HANDLING["node-failure"].retries == 0
    assert HANDLING["preemption"].retries > 0 and not HANDLING["preemption"].stop_study
    assert HANDLING["time-limit"].retries == 1
    assert HANDLING["hang"].status == "flake"


def test_what_counts_as_a_measurement() -> None:
    assert handling_for(None).counts_as_success
    assert HANDLING["benign-exit"].counts_as_success
    assert HANDLING["numerics-drift"].counts_as_success and HANDLING["numerics-drift"].flagged
    assert not HANDLING["numerics-nan"].counts_as_success
    counted = {name for name, handling in HANDLING.items() if handling.counts_as_success}
    assert counted == {"benign-exit", "numerics-drift"}


def test_a_chain_of_retries_counts_each_class_apart_and_ends_after_three() -> None:
    assert after_failure("nccl-init", []) == "retry"
    assert after_failure("coordination-timeout", ["coordination-timeout"]) == "retry"
    assert after_failure("coordination-timeout", ["coordination-timeout"] * 2) == "stop"
    assert after_failure("coordination-timeout", ["hang", "nccl-init"]) == "retry"  # one of its own, not three
    assert after_failure("nccl-init", ["hang", "nccl-init", "coordination-timeout"]) == "record"
    assert after_failure("coordination-timeout", ["nccl-init"] * 3) == "record"  # the chain is over, nothing stops
    assert after_failure("node-failure", []) == "stop"
    assert after_failure("crash", []) == "record"
    assert MAX_CHAIN_RETRIES == max(h.retries for h in HANDLING.values())
