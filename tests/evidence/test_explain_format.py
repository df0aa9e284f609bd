"""The report sentences and the people table."""

from __future__ import annotations

from pathlib import Path

from flagopt.evidence import analyze, explain, format_table

from .conftest import H200, HLO, MISC


def test_threshold_sentences_follow_the_real_sizes() -> None:
    ev = analyze(H200)
    below = explain({"xla": {"xla_gpu_all_gather_combine_threshold_bytes": 31457287}}, ev)
    assert "below the smallest per-layer all-gather (128 MiB), so no all-gathers are combined" in below[1]
    layer = explain({"xla_gpu_all_gather_combine_threshold_bytes": "1073741824"}, ev)
    assert "holds the 2 all-gathers of one layer (256 MiB" in layer[1] and "8 GiB all-gather total" in layer[1]
    step = explain({"--xla_gpu_reduce_scatter_combine_threshold_bytes": 1 << 33}, ev)
    assert "at least the 2 GiB reduce-scatter total per step" in step[1]
    assert explain({"xla_gpu_all_gather_combine_threshold_bytes": 1 << 30}, ev)[0].startswith(
        "each baseline step runs 64 all-gathers (4 ops in the module) moving 8 GiB, 80 % of collective bytes; "
        "32 reduce-scatters (2 ops in the module) moving 2 GiB, 20 % of collective bytes")  # the 4-byte all-reduce: < 1 %


def test_sentences_without_a_winner_dump_do_not_claim_what_xla_did() -> None:
    ev = analyze(H200)
    lines = explain({"xla": {"xla_gpu_enable_pipelined_all_gather": True,
                             "xla_gpu_collective_permute_decomposer_threshold": 1024}}, ev)  # fmt: skip
    text = "\n".join(lines)
    assert "the baseline has 4 (64 runs per step)" in text and "would show" in text
    assert "has no collective-permute, so it cannot change this step" in text
    assert "moved" not in text


def test_same_dump_as_winner_says_nothing_changed() -> None:
    ev = analyze(H200)
    lines = explain({"xla_gpu_all_gather_combine_threshold_bytes": 1 << 30}, ev, ev)
    assert any("same 4 all-gather ops as the baseline: nothing was combined" in line for line in lines)
    assert lines[-1].startswith("the winner's module has the same collectives as the baseline")


def test_winner_diff_and_no_collectives() -> None:
    pp, tp = analyze(HLO / "pp"), analyze(HLO / "tp")
    assert "collective-permute ops" in explain({}, pp, tp)[-1]
    nothing = analyze(MISC / "module_0010.jit_nocoll_misc.cpu_after_optimizations.txt")
    assert explain({"xla_gpu_all_gather_combine_threshold_bytes": 1}, nothing) == [
        "the baseline module has no collectives, so communication flags cannot explain a gain"]  # fmt: skip


def test_truncated_dump_is_flagged_in_sentences_and_table(tmp_path: Path) -> None:
    cut = tmp_path / "cut.txt"
    cut.write_bytes(H200.read_bytes()[:60000])
    ev = analyze(cut)
    assert "truncated" in explain({}, ev)[-1]
    assert "warning: the file ends inside computation" in format_table(ev)


def test_table_lists_every_kind_loop_and_marker() -> None:
    text = format_table(analyze(H200), width=160)
    for needle in ("all-gather", "reduce-scatter", "all-reduce", "bf16[4096,16384]", "128 MiB", "8 GiB",
                   "80.0 %", "while.32", "trip count 16", "trivially_pipelineable"):  # fmt: skip
        assert needle in text
    empty = format_table(analyze(MISC / "module_0010.jit_nocoll_misc.cpu_after_optimizations.txt"))
    assert "no collectives in this module" in empty
