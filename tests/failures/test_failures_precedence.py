"""Which class wins when a log, an exit status, the watchdog and the scheduler say different things."""

from __future__ import annotations

import math

import pytest

from flagopt.errors import FlagoptError
from flagopt.failures import (
    BENIGN_EXIT,
    CANCELLED,
    COORDINATION_TIMEOUT,
    CRASH,
    HANG,
    INCOMPLETE,
    NODE_FAILURE,
    NUMERICS_DRIFT,
    NUMERICS_NAN,
    OOM,
    PREEMPTION,
    TIME_LIMIT,
    classify,
    signatures_from_data,
)
from flagopt.workloads import _emit

STEPS = "\n".join(_emit.step_line(i, 0.3, 650.0, 50000.0, 32768, 3.0 - 0.1 * i) for i in range(10))
HEARTBEAT = _emit.coordination_timeout()
NOISE = "\n".join(
    [
        "E0000 00:00:1732230000.000000    1234 cuda_executor.cc:1001] failed call to cuInit: UNKNOWN ERROR (303)",
        "MSCCL++: Feature not enabled",
        "node-000:1:2 [0] NCCL INFO LL cutoff points not detected",
        "W bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.26GiB with "
        "freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could "
        "be performance gains if more memory were available.",
    ]
)


def cls(text: str, **kwargs: object) -> str | None:
    kwargs.setdefault("exit_code", 1)
    failure = classify(text, **kwargs)  # type: ignore[arg-type]
    return None if failure is None else failure.failure_class


def test_clean_complete_run_is_success_even_with_benign_noise() -> None:
    assert cls(NOISE + "\n" + STEPS, exit_code=0, window_complete=True, steps_seen=10) is None


def test_noise_lines_never_become_evidence() -> None:
    failure = classify(NOISE, exit_code=1)
    assert failure is not None and failure.failure_class == CRASH
    assert failure.lines == ()


@pytest.mark.parametrize("exit_code", [143, -15, 137, -9, 139, 1])
def test_any_end_after_a_complete_window_is_benign(exit_code: int) -> None:
    assert cls(STEPS, exit_code=exit_code, window_complete=True, steps_seen=10) == BENIGN_EXIT


def test_teardown_heartbeat_errors_after_the_window_are_benign() -> None:
    """Ranks killed first make the others log coordination errors; the measurement is still complete."""
    text = STEPS + "\n" + HEARTBEAT
    assert cls(text, exit_code=-15, killed_by="timeout", window_complete=True, steps_seen=10) == BENIGN_EXIT
    assert cls(text, exit_code=-15, killed_by="hang", steps_seen=3) == COORDINATION_TIMEOUT


def test_scheduler_node_failure_beats_the_log_symptom() -> None:
    assert cls(HEARTBEAT, exit_code=None, scheduler_state="NODE_FAIL") == NODE_FAILURE
    assert cls(HEARTBEAT, exit_code=None, scheduler_state="PREEMPTED") == PREEMPTION


def test_slurm_banners() -> None:
    banner = "slurmstepd: error: *** STEP 12.0 ON node-1 CANCELLED AT 2026-01-01T00:00:00 DUE TO {} ***"
    assert cls(banner.format("NODE FAILURE"), exit_code=-15) == NODE_FAILURE
    assert cls(banner.format("PREEMPTION"), exit_code=-15) == PREEMPTION
    assert cls(banner.format("TIME LIMIT"), exit_code=-15) == TIME_LIMIT
    user_cancel = "slurmstepd: error: *** JOB 12 ON node-1 CANCELLED AT 2026-01-01T00:00:00 ***"
    assert cls(user_cancel, exit_code=-15) == CANCELLED
    assert cls("slurmstepd: error: Detected 1 oom_kill event in StepId=12.0.", exit_code=137) == OOM
    assert cls("", exit_code=None, scheduler_state="OUT_OF_MEMORY") == OOM


def test_watchdog_verdicts() -> None:
    assert cls("", exit_code=-15, killed_by="init-timeout") == HANG
    assert cls(STEPS, exit_code=-15, killed_by="hang", steps_seen=10) == HANG
    assert cls(STEPS, exit_code=-15, killed_by="timeout", steps_seen=10) == TIME_LIMIT
    assert cls(STEPS, exit_code=-15, killed_by="signal", steps_seen=10) == CANCELLED
    assert cls("", exit_code=None, scheduler_state="TIMEOUT") == TIME_LIMIT


def test_stuck_rendezvous_means_hang_only_before_the_first_step() -> None:
    stuck = ("W0101 00:00:00.000000 1 rendezvous.cc:120] This thread has been waiting for `first call to collective "
             "operation 0; run_id=0` for 20 seconds and may be stuck.")  # fmt: skip
    assert cls(stuck, exit_code=-6, steps_seen=0) == HANG
    assert cls(stuck + "\n" + STEPS, exit_code=-6, steps_seen=10) == CRASH


def test_nan_loss_fails_unless_the_baseline_loss_is_nan_too() -> None:
    text = STEPS + "\n" + _emit.step_line(10, 0.3, 650.0, 50000.0, 32768, math.nan)
    assert cls(text, exit_code=0, window_complete=True, steps_seen=11) == NUMERICS_NAN
    assert cls(text, exit_code=0, window_complete=True, steps_seen=11, reference_loss=math.nan) is None


def test_loss_drift_is_flagged_only_beyond_the_tolerance() -> None:
    last = 3.0 - 0.1 * 9
    failure = classify(STEPS, exit_code=0, window_complete=True, steps_seen=10, reference_loss=last * 1.2)
    assert failure is not None and failure.failure_class == NUMERICS_DRIFT
    assert failure.details["final_loss"] == pytest.approx(last)
    assert cls(STEPS, exit_code=0, window_complete=True, steps_seen=10, reference_loss=last * 1.01) is None


def test_clean_exit_before_the_window_is_incomplete() -> None:
    assert cls(STEPS, exit_code=0, steps_seen=10) == INCOMPLETE


def test_extra_signatures_from_a_space_file() -> None:
    extra = signatures_from_data(
        [{"name": "gcs-mount", "class": "crash", "patterns": [r"gcsfuse: mount (?P<mount>\S+) failed"],
          "reason": "the data bucket is not mounted; fix the mount before resuming"}], "space.yaml")  # fmt: skip
    failure = classify("gcsfuse: mount /data failed", exit_code=1, extra_signatures=extra)
    assert failure is not None and failure.reason.startswith("the data bucket")
    assert failure.details["mount"] == "/data" and failure.details["signature"] == "gcs-mount"


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"name": "x", "class": "mystery", "patterns": ["a"]}, "signatures[0].class"),
        ({"name": "x", "class": "crash", "patterns": ["(unclosed"]}, "signatures[0].patterns[0]"),
        ({"name": "x", "class": "crash", "patterns": []}, "signatures[0].patterns"),
        ({"name": "x", "class": "crash", "patterns": ["a"], "regex": "b"}, "signatures[0]"),
    ],
)
def test_bad_extra_signatures_name_the_key(entry: dict[str, object], key: str) -> None:
    with pytest.raises(FlagoptError) as info:
        signatures_from_data([entry], "space.yaml")
    assert info.value.source == "space.yaml" and info.value.key == key
