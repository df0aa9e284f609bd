"""Collectives found in real dumps (2xH200 FSDP, CPU pp/tp/fsdp) and in damaged or odd ones."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from flagopt.errors import FlagoptError
from flagopt.evidence import analyze, pick_module
from flagopt.evidence._hlo import parse_shape

from .conftest import H200, HLO, MISC

# Read off the fixture: jit(_step) of probe_fsdp.py (L=16, D=4096, F=16384, bf16, 2 GPUs). The forward while
# (while.32, body region_0.1_spmd) gathers w1 and w2 of one layer; the backward while (while.33, body
# region_2.3_spmd) gathers them again and reduce-scatters their gradients; both loops run 16 times.
AG_BYTES = 4096 * 16384 * 2
RS_BYTES = 2048 * 16384 * 2


@pytest.fixture(scope="module")
def h200():
    return analyze(H200)


def test_h200_counts_match_the_collective_ops_written_in_the_file(h200, h200_text: str) -> None:
    for kind in ("all-gather", "reduce-scatter", "all-reduce"):
        in_file = len(re.findall(rf"= \S+ {kind}\(", h200_text))
        assert len(h200.of_kind(kind)) == in_file
    assert {c.kind for c in h200.collectives} == {"all-gather", "reduce-scatter", "all-reduce"}


def test_h200_all_gathers_are_per_layer_async_ops_inside_the_two_layer_loops(h200) -> None:
    ags = h200.of_kind("all-gather")
    assert sorted(c.computation for c in ags) == ["region_0.1_spmd"] * 2 + ["region_2.3_spmd"] * 2
    assert sorted(c.loops for c in ags) == [("while.32",)] * 2 + [("while.33",)] * 2
    assert {c.shapes for c in ags} == {("bf16[4096,16384]",), ("bf16[16384,4096]",)}
    assert all(c.bytes == AG_BYTES and c.dtypes == ("bf16",) for c in ags)
    assert all(c.is_async and c.opcode == "async-start" and c.done and c.done.startswith("all-gather-done") for c in ags)
    assert all(c.executions == 16 and not c.crosses_iteration and not c.is_pipelined for c in ags)
    assert all(c.collective_backend_config.get("is_sync") is False for c in ags)
    assert all(c.replica_groups is not None and c.replica_groups.groups == ((0, 1),) for c in ags)
    assert all("trivially_pipelineable" in c.scheduling for c in ags)


def test_h200_summary_per_step_bytes_and_shares(h200) -> None:
    s = h200.summary()
    assert list(s) == ["all-gather", "reduce-scatter", "all-reduce"]
    assert s["all-gather"].executions == 4 * 16 and s["all-gather"].bytes_per_step == 64 * AG_BYTES
    assert s["reduce-scatter"].count == 2 and s["reduce-scatter"].bytes_per_step == 32 * RS_BYTES
    total = 64 * AG_BYTES + 32 * RS_BYTES + 4
    assert s["all-gather"].share == pytest.approx(64 * AG_BYTES / total)
    assert sum(k.share for k in s.values()) == pytest.approx(1.0)
    assert {(loop.name, loop.body, loop.trip_count) for loop in h200.loops} == {
        ("while.32", "region_0.1_spmd", 16), ("while.33", "region_2.3_spmd", 16)}  # fmt: skip


def test_h200_scalar_all_reduce_inside_an_async_triton_fusion_is_found_in_the_entry(h200) -> None:
    (ar,) = h200.of_kind("all-reduce")
    assert ar.computation == "main.6_spmd" and not ar.in_loop
    assert ar.shapes == ("f32[]",) and ar.bytes == 4 and ar.is_async and ar.done == "fusion-done"
    assert ar.collective_backend_config["kernel_strategy"] == "KERNEL_STRATEGY_TRITON_ONE_SHOT"


def test_json_has_stable_keys_and_round_trips(h200) -> None:
    data = json.loads(h200.to_json())
    assert list(data) == ["schema", "source", "module", "selection", "lines_read", "truncated", "warnings",
                          "loops", "summary", "collectives"]  # fmt: skip
    assert data["module"] == "jit__step" and data["truncated"] is False
    assert data["summary"]["all-gather"]["bytes_per_step"] == 64 * AG_BYTES
    assert data["collectives"][0]["replica_groups"]["form"] == "mesh"
    assert json.loads(h200.to_json()) == data


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_truncated_copies_never_raise_and_report_what_was_read(tmp_path: Path, h200, fraction: float) -> None:
    data = H200.read_bytes()
    cut = tmp_path / "cut_after_optimizations.txt"
    cut.write_bytes(data[: int(len(data) * fraction)])
    ev = analyze(cut)
    assert ev.truncated and ev.warnings
    assert ev.lines_read < h200.lines_read
    assert len(ev.collectives) <= len(h200.collectives)
    json.loads(ev.to_json())


def test_truncated_before_the_entry_still_lists_the_loop_bodies_collectives(tmp_path: Path, h200_text: str) -> None:
    cut = tmp_path / "cut.txt"
    cut.write_text(h200_text[: h200_text.index("ENTRY %main")])
    ev = analyze(cut)
    assert any("no ENTRY" in w for w in ev.warnings)
    # every collective of the module is defined before the entry, so none is lost; their loops are.
    assert len(ev.of_kind("all-gather")) == 4 and len(ev.of_kind("reduce-scatter")) == 2
    assert len(ev.of_kind("all-reduce")) == 1
    assert not any(c.in_loop for c in ev.collectives)


def test_a_module_without_collectives_is_an_empty_summary(tmp_path: Path) -> None:
    ev = analyze(MISC / "module_0010.jit_nocoll_misc.cpu_after_optimizations.txt")
    assert ev.collectives == () and ev.summary() == {} and not ev.truncated and ev.warnings == ()
    assert json.loads(ev.to_json())["summary"] == {}


def test_directory_picks_the_largest_module_with_collectives(tmp_path: Path) -> None:
    ev = analyze(MISC)
    assert Path(ev.source).name == "module_0006.jit_misc_step.cpu_after_optimizations.txt"
    assert "with collectives" in ev.selection
    # misc_step: one of each kind, the ppermute inside the 3-trip scan, the all-to-all a 2-operand tuple
    s = ev.summary()
    assert {k: v.count for k, v in s.items()} == {
        "all-gather": 2, "reduce-scatter": 1, "all-reduce": 1, "collective-permute": 1, "all-to-all": 1}  # fmt: skip
    (cp,) = ev.of_kind("collective-permute")
    assert cp.loops == ("while.9",) and cp.executions == 3
    assert cp.source_target_pairs == ((0, 2), (2, 0), (1, 3), (3, 1))
    (a2a,) = ev.of_kind("all-to-all")
    assert a2a.shapes == ("f32[2,8]", "f32[2,8]") and a2a.bytes == 2 * 2 * 8 * 4
    assert ev.of_kind("all-reduce")[0].replica_groups.groups == ((0, 2), (1, 3))  # psum over mesh axis x


def test_directory_rule_prefers_train_step_then_honours_module(tmp_path: Path) -> None:
    for src in MISC.glob("*after_optimizations.txt"):
        shutil.copy(src, tmp_path / src.name)
    small = tmp_path / "sub" / "module_0099.jit_train_step.sm_9.0_gpu_after_optimizations.txt"
    small.parent.mkdir()
    small.write_text((MISC / "module_0028.jit_tuple_misc.cpu_after_optimizations.txt").read_text())
    (tmp_path / "module_0099.jit_train_step.sm_9.0_gpu_after_optimizations-buffer-assignment.txt").write_text("x" * 99999)
    path, why = pick_module(tmp_path)
    assert path == small and "train_step" in why
    path, _ = pick_module(tmp_path, module="tp_misc")
    assert path.name == "module_0014.jit_tp_misc.cpu_after_optimizations.txt"
    with pytest.raises(FlagoptError, match="no dump file name contains 'nope'"):
        pick_module(tmp_path, module="nope")


def test_missing_path_and_empty_directory_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(FlagoptError, match="no such file"):
        analyze(tmp_path / "absent")
    with pytest.raises(FlagoptError, match="no \\*after_optimizations.txt"):
        analyze(tmp_path)


def test_tuple_all_reduce_counts_every_operand() -> None:
    ev = analyze(MISC / "module_0028.jit_tuple_misc.cpu_after_optimizations.txt")
    tuples = [c for c in ev.of_kind("all-reduce") if len(c.shapes) > 1]
    assert [c.shapes for c in tuples] == [("f32[4,4]", "f32[4,2]")]
    assert tuples[0].bytes == (16 + 8) * 4 and tuples[0].replica_groups.groups == ((0, 1, 2, 3),)


def _ops_in_text(path: Path, kind: str) -> int:
    """An independent count: lines whose opcode (after the result shape) is ``kind``."""
    text = re.sub(r"/\*index=\d+\*/", "", next(path.glob("*after_optimizations.txt")).read_text())
    return len(re.findall(rf"^\s*(?:ROOT\s+)?%[\w.\-]+ = [^=]*?\s{kind}\(", text, re.M))


def _trip_counts(path: Path) -> set[int]:
    text = next(path.glob("*after_optimizations.txt")).read_text()
    return {int(n) for n in re.findall(r'while\(.*"known_trip_count":\{"n":"(\d+)"', text)}


# The CPU dumps of the reference workload (tests/fixtures/hlo/README.md) are regenerated by the workload's
# owner, so their counts are read from the text here, not written down.
def test_pp_dump_has_the_ring_permutes_inside_the_bubble_loops() -> None:
    ev = analyze(HLO / "pp")
    cps = ev.of_kind("collective-permute")
    assert len(cps) == _ops_in_text(HLO / "pp", "collective-permute") >= 1
    assert all(c.in_loop and c.executions in _trip_counts(HLO / "pp") for c in cps)
    rings = {c.source_target_pairs for c in cps}
    assert ((0, 1), (1, 2), (2, 3), (3, 0)) in rings  # the forward stage-to-stage ring on 4 devices
    assert len(ev.of_kind("all-reduce")) == _ops_in_text(HLO / "pp", "all-reduce")


def test_tp_dump_has_only_all_reduces_mostly_in_the_layer_loops() -> None:
    ev = analyze(HLO / "tp")
    assert set(ev.summary()) == {"all-reduce"}
    ars = ev.of_kind("all-reduce")
    assert len(ars) == _ops_in_text(HLO / "tp", "all-reduce")
    assert sum(c.in_loop for c in ars) > len(ars) / 2
    assert any(len(c.shapes) > 1 for c in ars)  # a combined (tuple) all-reduce
    for c in ars:
        assert c.bytes == sum(a.nbytes for a in parse_shape(" ".join(c.shapes)))
        assert c.replica_groups is not None and c.replica_groups.group_size == 4


def test_fsdp_cpu_dump_gathers_parameters_inside_the_layer_loops() -> None:
    ev = analyze(HLO / "fsdp_cpu")
    s = ev.summary()
    for kind in ("all-gather", "all-reduce", "all-to-all"):
        assert s[kind].count == _ops_in_text(HLO / "fsdp_cpu", kind)
    assert "reduce-scatter" not in s  # the CPU pipeline has no reduce-scatter creation pass
    assert s["all-gather"].in_loop_count > s["all-gather"].count / 2
    loop_trips = {loop.trip_count for loop in ev.loops}
    assert loop_trips == _trip_counts(HLO / "fsdp_cpu")
