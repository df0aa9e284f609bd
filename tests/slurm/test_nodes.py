"""Pinned-node checks against the real local cluster."""

from __future__ import annotations

import pytest

from flagopt.errors import StudyError
from flagopt.executors._slurm_query import check_pinned_nodes, node_states

pytestmark = pytest.mark.slurm


def test_node_states_expands_the_host_list(slurm_cluster: set[str]) -> None:
    states = node_states("node[1-2]")
    assert set(states) == {"node1", "node2"}


def test_down_node_is_named_with_state_and_reason(slurm_cluster: set[str], down_node: object) -> None:
    down_node("node3")  # type: ignore[operator]
    assert node_states("node[2-3]")["node3"].startswith("down")
    with pytest.raises(StudyError) as caught:
        check_pinned_nodes("node[2-3]")
    message = str(caught.value)
    assert "node3 is down" in message and "flagopt-test" in message
    assert "node2 is" not in message


def test_up_nodes_pass(slurm_cluster: set[str]) -> None:
    check_pinned_nodes("node1,node2")  # raises StudyError when a pinned node is not up
    states = node_states("node1,node2")
    assert set(states) == {"node1", "node2"}
    assert all(not any(bad in s.upper() for bad in ("DOWN", "DRAIN", "FAIL")) for s in states.values())


def test_unknown_node_fails_with_slurms_message(slurm_cluster: set[str]) -> None:
    with pytest.raises(StudyError, match="Node node9 not found"):
        check_pinned_nodes("node[1,9]")
