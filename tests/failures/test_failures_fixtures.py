"""Public failure logs and real XLA messages classify as what they are."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from flagopt.failures import (
    BENIGN_EXIT,
    COORDINATION_TIMEOUT,
    INCOMPLETE,
    NCCL_INIT,
    OOM,
    UNKNOWN_FLAG,
    classify,
)
from flagopt.flags import parse_flag_rejection

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_coordination_heartbeat_timeout_fixture() -> None:
    failure = classify(read("f03_jax_coordination_heartbeat_timeout_jax_23599.log"), exit_code=1)
    assert failure is not None and failure.failure_class == COORDINATION_TIMEOUT
    assert any("heartbeat timeout" in line for line in failure.lines)


def test_nccl_comm_init_rank_fixture() -> None:
    failure = classify(read("f05_nccl_comminitrank_unhandled_system_error_jax_22747.log"), exit_code=1)
    assert failure is not None and failure.failure_class == NCCL_INIT
    assert any("ncclCommInitRank" in line for line in failure.lines)


def test_gpu_oom_fixture_records_requested_bytes() -> None:
    text = read("f10_gpu_oom_bufferassignment_afprofile_8.log")
    failure = classify(text, exit_code=1)
    assert failure is not None and failure.failure_class == OOM
    expected = int(re.search(r"allocate (\d+) bytes", text).group(1))  # type: ignore[union-attr]
    assert failure.details["requested_bytes"] == expected
    assert str(expected) in failure.reason


def test_oom_then_sigterm_is_still_oom() -> None:
    text = read("f10_gpu_oom_bufferassignment_afprofile_8.log") + "\nTerminated\n"
    failure = classify(text, exit_code=143, killed_by="signal", scheduler_state="CANCELLED")
    assert failure is not None and failure.failure_class == OOM


def test_en_dash_typo_fixture() -> None:
    failure = classify(read("f13_unknown_flags_xla_flags_jax_13148.log"), exit_code=134)
    assert failure is not None and failure.failure_class == UNKNOWN_FLAG
    assert failure.details["flag_names"] == ["xla_force_host_platform_device_count"]
    assert failure.details["typos"] == ["-\u2013xla_force_host_platform_device_count=4"]
    assert "'--'" in failure.reason
    # The IPython input line that sets XLA_FLAGS is not the error.
    assert all("os.environ" not in line for line in failure.lines)


def _reference_blocks() -> dict[str, tuple[str, int]]:
    blocks: dict[str, tuple[str, int]] = {}
    version, body = "", []
    for line in read("unknown_xla_flags_messages_by_jaxlib.log").splitlines():
        if line.startswith("## jaxlib "):
            version, body = line.split()[-1], []
        elif line.startswith("[rc="):
            blocks[version] = ("\n".join(body), int(line[4:-1]))
        elif version:
            body.append(line)
    return blocks


def _presence() -> dict[str, dict[str, str]]:
    lines = [line for line in read("xla_flag_presence_by_jaxlib.csv").splitlines() if not line.startswith("#")]
    return {row["flag"]: row for row in csv.DictReader(lines)}


# The flags the reference run put in XLA_FLAGS (its header line says so).
REFERENCE_FLAGS = ["xla_gpu_enable_async_all_gather", "xla_gpu_graph_level", "xla_gpu_enable_triton_softmax_fusion"]


@pytest.mark.parametrize("version", sorted(_reference_blocks()))
def test_every_jaxlib_message_format_lists_exactly_the_unknown_flags(version: str) -> None:
    """The parsed list must equal what the (independently measured) presence matrix says is unknown."""
    text, rc = _reference_blocks()[version]
    presence = _presence()
    truly_unknown = [name for name in REFERENCE_FLAGS if presence[name][f"jaxlib_{version}"] == "-"]
    rejection = parse_flag_rejection(text)
    failure = classify(text, exit_code=rc)
    if not truly_unknown:
        # rc 0 and no step lines: the probe simply ended; nothing about flags.
        assert rejection is None and failure is not None and failure.failure_class == INCOMPLETE
        return
    assert rejection is not None and list(rejection.names) == truly_unknown
    assert failure is not None and failure.failure_class == UNKNOWN_FLAG
    assert failure.details["flag_names"] == truly_unknown


def test_removed_flag_reason_names_the_removal_version() -> None:
    text, rc = _reference_blocks()["0.10.2"]
    failure = classify(text, exit_code=rc)
    assert failure is not None
    assert failure.details["removal_notes"]["xla_gpu_graph_level"].startswith("removed in jaxlib 0.7.2")
    assert "removed in jaxlib 0.4.28" in failure.reason  # xla_gpu_enable_async_all_gather


def _value_error_blocks() -> list[str]:
    return [block for block in read("xla_flag_value_errors_jaxlib_0.10.2.log").split("## XLA_FLAGS=")[1:]]


def test_bad_values_are_invalid_flags_and_name_the_value() -> None:
    blocks = _value_error_blocks()
    named = {}
    for block in blocks:
        failure = classify(block, exit_code=1)
        assert failure is not None and failure.failure_class == UNKNOWN_FLAG
        named.update({name: value for name, value in failure.details["bad_values"]})  # type: ignore[union-attr]
    assert named == {
        "xla_gpu_enable_latency_hiding_scheduler": "maybe",
        "xla_gpu_all_gather_combine_threshold_bytes": "1e3",
        "xla_gpu_enable_command_buffer": "BOGUS",
    }
    # The enum case names no flag: still invalid, and the reason says so instead of inventing a name.
    enum_block = next(b for b in blocks if "while_loop_unrolling=BOGUS'" in b.splitlines()[0])
    failure = classify(enum_block, exit_code=1)
    assert failure is not None and failure.details["bad_values"] == [] and "names no flag" in failure.reason


def test_bad_value_hides_the_unknown_flag_in_the_same_set() -> None:
    block = _value_error_blocks()[0]
    assert "--xla_bogus_flag_xyz=1" in block.splitlines()[0]
    failure = classify(block, exit_code=1)
    assert failure is not None and failure.details["unknown_flags"] == []


def test_benign_exit_after_complete_window() -> None:
    failure = classify("completed step: 9, seconds: 0.1, loss: 2.0\nTerminated", exit_code=143, window_complete=True,
                       steps_seen=10)  # fmt: skip
    assert failure is not None and failure.failure_class == BENIGN_EXIT
