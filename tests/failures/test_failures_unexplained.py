"""Failures no crash signature explains, and an NCCL transport error that is the fabric's, not the configuration's."""

from __future__ import annotations

from pathlib import Path

from flagopt.failures import CRASH, NCCL_INIT, classify, handling_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
STEP = "completed step: {n}, seconds: 1.0, TFLOP/s/device: 1.0, Tokens/s/device: 100.0, total_weights: 8, loss: 2.0"


def test_nccl_net_ib_completion_error_is_a_retried_infrastructure_flake() -> None:
    # Issue 25: steps ran, then NET/IB reported a failed work completion, silence, exit 1. It was a `crash`
    # (blamed on the configuration, never retried); it is the fabric's.
    text = (FIXTURES / "nccl_net_ib_completion_error.log").read_text()
    failure = classify(text, exit_code=1, steps_seen=4)
    assert failure is not None and failure.failure_class == NCCL_INIT
    assert failure.details["signature"] == "nccl-net-transport"
    assert failure.details["peer"] == "10.16.3.26<41873>" and failure.details["ib_status"] == 12
    assert "infrastructure" in failure.reason and "10.16.3.26" in failure.reason
    assert any("vendor err 129" in line for line in failure.lines)
    handling = handling_for(failure.failure_class)
    assert handling.status == "flake" and handling.retries >= 1


def test_an_unexplained_crash_shows_the_last_meaningful_log_lines() -> None:
    # `python -m MaxText.train` without MaxText installed: one line from the interpreter, no traceback. The failure
    # said "the job failed with exit code 1" with no lines at all.
    log = "\n".join([
        "+ export XLA_FLAGS=--xla_cpu_multi_thread_eigen=false",
        "/work/.venv-maxtext/bin/python: Error while finding module specification for 'MaxText.train' "
        "(ModuleNotFoundError: No module named 'MaxText')",
        "",
    ])
    failure = classify(log, exit_code=1)
    assert failure is not None and failure.failure_class == CRASH
    assert "No module named 'MaxText'" in failure.reason
    assert failure.lines and "No module named 'MaxText'" in failure.lines[-1]


def test_with_no_signature_at_all_the_tail_is_the_reason() -> None:
    log = "\n".join([STEP.format(n=0), STEP.format(n=1), "worker 3: giving up on shard /data/part-0007", "",
                     "bye", "  ", STEP.format(n=2)])
    failure = classify(log, exit_code=3, steps_seen=3)
    assert failure is not None and failure.failure_class == CRASH
    assert failure.lines == ("worker 3: giving up on shard /data/part-0007", "bye")  # blank and step lines left out
    assert failure.reason == "the job failed with exit code 3; the log ends: bye"
    empty = classify("", exit_code=3)
    assert empty is not None and empty.lines == () and "the log is empty" in empty.reason
