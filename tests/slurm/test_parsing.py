"""The Slurm backend's pure parts: host lists, states, times, settings (no cluster needed)."""

from __future__ import annotations

import time

import pytest

from flagopt.errors import FlagoptError, StudyError
from flagopt.executors._slurm import SlurmSettings
from flagopt.executors._slurm_query import expand_nodelist, job_state, node_is_up, parse_slurm_time


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("node1", ["node1"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node[1,3-4],gpu07", ["node1", "node3", "node4", "gpu07"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ],
)
def test_expand_nodelist(text: str, names: list[str]) -> None:
    assert expand_nodelist(text) == names


@pytest.mark.parametrize("text", ["node[1-", "node[a-b]", "node1]"])
def test_expand_nodelist_rejects_malformed_lists(text: str) -> None:
    with pytest.raises(StudyError, match="nodelist"):
        expand_nodelist(text)


@pytest.mark.parametrize(
    ("slurm", "state"),
    [("CANCELLED by 0", "CANCELLED"), ("COMPLETED", "FINISHED"), ("DEADLINE", "TIMEOUT"), ("BOOT_FAIL", "NODE_FAIL"),
     ("COMPLETING", "RUNNING"), ("REQUEUED", "PENDING"), ("SOMETHING_NEW", "UNKNOWN"), ("", "UNKNOWN")],
)
def test_job_state(slurm: str, state: str) -> None:
    assert job_state(slurm) == state


@pytest.mark.parametrize(
    ("state", "up"),
    [("idle", True), ("mixed", True), ("idle~", True), ("down", False), ("down*", False), ("idle*", False),
     ("drained", False), ("draining", False), ("fail", False)],
)
def test_node_is_up(state: str, up: bool) -> None:
    assert node_is_up(state) is up


def test_parse_slurm_time_reads_local_time() -> None:
    stamp = time.mktime((2026, 11, 22, 0, 5, 9, 0, 0, -1))
    assert parse_slurm_time("2026-11-22T00:05:09") == stamp
    assert parse_slurm_time("N/A") is None and parse_slurm_time("Unknown") is None


def test_time_limit_is_the_trial_timeout_plus_margin_unless_set() -> None:
    assert SlurmSettings(time_margin_s=0).time_limit_min(61.0) == 2
    assert SlurmSettings(time_min=7).time_limit_min(6000.0) == 7
    assert SlurmSettings().time_limit_min(None) >= 60


@pytest.mark.parametrize("bad", [{"nodes": 0}, {"tasks_per_node": -1}, {"time_min": 0}, {"pending_deadline_s": 0}])
def test_settings_reject_nonsense(bad: dict[str, object]) -> None:
    with pytest.raises(FlagoptError):
        SlurmSettings(**bad)  # type: ignore[arg-type]
