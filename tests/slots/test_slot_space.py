"""``executor.slurm.slots`` in the space file and ``run --slot``/``--nodelist``: parsed, checked, one clear error."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import pytest

from flagopt.cli._run import apply_overrides
from flagopt.errors import FlagoptError, SpaceError
from flagopt.space import load_space
from flagopt.study._fingerprint import fingerprint

BASE = """
name: t
command: ["python3", "-c", "pass"]
"""


def load(tmp_path: Path, executor: str):
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(BASE) + executor + "\n")
    return load_space(path)


def test_slots_are_read_in_order(tmp_path: Path) -> None:
    space = load(tmp_path, 'executor: {kind: slurm, slurm: {slots: ["gpu[01-08]", "gpu[09-16]"], nodes: 8}}')
    assert space.executor.slurm.slots == ("gpu[01-08]", "gpu[09-16]")
    assert space.executor.slurm.slot_nodelists == ("gpu[01-08]", "gpu[09-16]")
    one = load(tmp_path, "executor: {kind: slurm, slurm: {nodelist: node1}}")
    assert one.executor.slurm.slot_nodelists == ("node1",)
    assert load(tmp_path, "executor: {kind: local}").executor.slurm.slot_nodelists == (None,)


@pytest.mark.parametrize("executor,key,reason", [
    ('{kind: slurm, slurm: {slots: ["a", "b"], nodelist: a}}', "executor.slurm.slots", "not both"),
    ('{kind: slurm, slurm: {slots: []}}', "executor.slurm.slots", "at least one"),
    ('{kind: slurm, slurm: {slots: ["a", "a"]}}', "executor.slurm.slots[1]", "listed twice"),
    ('{kind: slurm, slurm: {slots: ["a", 3]}}', "executor.slurm.slots[1]", "nodelist"),
    ('{kind: slurm, slurm: {slots: ["a;rm -rf /"]}}', "executor.slurm.slots[0]", ""),
    ('{kind: slurm, slurm: {slots: "a,b"}}', "executor.slurm.slots", "must be list"),
])
def test_bad_slots_name_the_key(tmp_path: Path, executor: str, key: str, reason: str) -> None:
    with pytest.raises(SpaceError) as info:
        load(tmp_path, f"executor: {executor}")
    assert info.value.key == key, info.value.message
    assert reason in info.value.reason


def overrides(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"executor": None, "nodelist": None, "slot": None, "partition": None, **kw})


def test_nodelist_override_runs_one_slot_and_slot_override_several(tmp_path: Path) -> None:
    space = load(tmp_path, 'executor: {kind: slurm, slurm: {slots: ["n[1-2]", "n[3-4]"], nodes: 2}}')
    assert apply_overrides(space, overrides(nodelist="n[5-6]")).executor.slurm.slot_nodelists == ("n[5-6]",)
    assert apply_overrides(space, overrides(slot=["n[5-6]", "n[7-8]"])).executor.slurm.slots == ("n[5-6]", "n[7-8]")
    with pytest.raises(FlagoptError, match="not both"):
        apply_overrides(space, overrides(nodelist="n1", slot=["n2"]))
    with pytest.raises(FlagoptError, match="twice"):
        apply_overrides(space, overrides(slot=["n2", "n2"]))


def test_adding_a_slot_keeps_the_study_comparable_but_moving_the_first_does_not(tmp_path: Path) -> None:
    one = fingerprint(load(tmp_path, "executor: {kind: slurm, slurm: {nodelist: n1}}"))
    two = fingerprint(load(tmp_path, 'executor: {kind: slurm, slurm: {slots: ["n1", "n2"]}}'))
    moved = fingerprint(load(tmp_path, 'executor: {kind: slurm, slurm: {slots: ["n3", "n2"]}}'))
    assert one["executor"] == two["executor"]  # what invalidates earlier runs is unchanged by a second slot
    assert two["settings"]["slurm"]["slots"] == ["n1", "n2"]
    assert moved["executor"] != one["executor"]
