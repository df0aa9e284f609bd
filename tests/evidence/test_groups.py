"""Replica groups in every printed form expand to the same device groups."""

from __future__ import annotations

import pytest

from flagopt.evidence import parse_replica_groups
from flagopt.evidence._groups import parse_pairs


@pytest.mark.parametrize(
    "raw, groups",
    [
        ("{{0,1}}", ((0, 1),)),
        ("{{0,2},{1,3}}", ((0, 2), (1, 3))),
        ("[1,2]<=[2]", ((0, 1),)),
        ("[2,2]<=[4]", ((0, 1), (2, 3))),
        ("[2,2]<=[2,2]T(1,0)", ((0, 2), (1, 3))),
        ("[2,4]<=[2,2,2]T(2,1,0)", ((0, 4, 2, 6), (1, 5, 3, 7))),
        ("mesh['axis_0'=2] {'axis_0'}", ((0, 1),)),
        ("mesh['x'=2,'y'=2] {'x'}", ((0, 2), (1, 3))),
        ("mesh['x'=2,'y'=2] {'y'}", ((0, 1), (2, 3))),
        ("mesh['x'=2,'y'=2] {'x','y'}", ((0, 1, 2, 3),)),
    ],
)
def test_forms_expand_to_groups(raw: str, groups: tuple) -> None:
    parsed = parse_replica_groups(raw)
    assert parsed is not None and parsed.groups == groups
    assert parsed.num_groups == len(groups) and parsed.group_size == len(groups[0])


def test_empty_groups_mean_all_devices_and_odd_text_is_kept_raw() -> None:
    everyone = parse_replica_groups("{}")
    assert everyone is not None and everyone.form == "all" and everyone.groups is None
    odd = parse_replica_groups("something[new]")
    assert odd is not None and odd.form == "unknown" and odd.raw == "something[new]"
    assert parse_replica_groups(None) is None


def test_source_target_pairs() -> None:
    assert parse_pairs("{{0,1},{1,2},{2,3},{3,0}}") == ((0, 1), (1, 2), (2, 3), (3, 0))
    assert parse_pairs(None) is None
