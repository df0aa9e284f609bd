"""Threshold brackets around the real sizes, and a snippet the space loader accepts."""

from __future__ import annotations

from pathlib import Path

import yaml

from flagopt.evidence import analyze, space_snippet, suggest_brackets, threshold_flags
from flagopt.space import load_space

from .conftest import H200, HLO

REPO = Path(__file__).resolve().parents[2]


def test_h200_all_gather_brackets_straddle_one_op_one_layer_and_the_step() -> None:
    ev = analyze(H200)
    op = 4096 * 16384 * 2  # one per-layer all-gather
    layer = 2 * op  # the two all-gathers of one layer loop body
    step = 64 * op  # 4 per-layer ops x 16 trips
    below, per_layer, everything = suggest_brackets(ev)["all-gather"]
    assert below < op <= per_layer and layer <= per_layer < 2 * layer
    assert everything >= step and everything < 2 * step


def test_brackets_are_ascending_distinct_powers_of_two_for_every_kind_with_a_flag() -> None:
    for path in (H200, HLO / "pp", HLO / "tp", HLO / "fsdp_cpu", HLO / "evidence_misc"):
        ev = analyze(path)
        brackets = suggest_brackets(ev)
        assert set(brackets) == set(ev.summary()) & set(threshold_flags())
        for values in brackets.values():
            assert values == sorted(set(values)) and len(values) >= 2
            assert all(v > 0 and v & (v - 1) == 0 for v in values)


def test_permute_brackets_decompose_all_then_none() -> None:
    ev = analyze(HLO / "pp")
    values = suggest_brackets(ev)["collective-permute"]
    sizes = [c.bytes for c in ev.of_kind("collective-permute")]
    assert values[0] <= min(sizes) and values[-1] > max(sizes)


def test_snippet_is_yaml_with_flag_and_int_choices() -> None:
    brackets = suggest_brackets(analyze(H200))
    data = yaml.safe_load(space_snippet(brackets))
    assert data["params"]["ag_threshold"] == {
        "xla": "xla_gpu_all_gather_combine_threshold_bytes", "choices": brackets["all-gather"]}  # fmt: skip
    assert data["params"]["rs_threshold"]["xla"] == "xla_gpu_reduce_scatter_combine_threshold_bytes"
    assert all(type(v) is int for p in data["params"].values() for v in p["choices"])
    assert space_snippet({"all-to-all": [1, 2]}) == "params:\n"  # no flag for that kind


def test_snippet_params_load_in_a_real_space_file(tmp_path: Path) -> None:
    space = yaml.safe_load((REPO / "search_spaces" / "demo.yaml").read_text())
    snippet = space_snippet(suggest_brackets(analyze(HLO / "pp")) | suggest_brackets(analyze(H200)))
    space["params"] = yaml.safe_load(snippet)["params"]
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    loaded = load_space(path)
    by_name = {p.name: p for p in loaded.params}
    assert set(by_name) == {"ag_threshold", "rs_threshold", "ar_threshold", "cp_threshold"}
    assert by_name["cp_threshold"].key == "xla_gpu_collective_permute_decomposer_threshold"
    assert by_name["ag_threshold"].choices == tuple(suggest_brackets(analyze(H200))["all-gather"])
