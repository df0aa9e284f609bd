"""Older and rarer HLO forms: X-start/X-done pairs, pipelined send/recv, ops carried across loop iterations.

The module below is written in the text format XLA GPU printed in 2024 (jaxlib 0.4.2x), before async collectives
became ``async-start`` wrappers: a layer loop whose all-gather for the next iteration starts in this one
(collective pipeliner: ``is_pipelined``), a combined all-gather-start of two operands, an all-reduce-start, and a
send/recv pair pipelined with ``_xla_send_recv_pipeline``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flagopt.evidence import analyze, explain

OLD_STYLE = """HloModule jit_train_step, is_scheduled=true

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %a = f32[] add(f32[] %x, f32[] %y)
}

%body (p: (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0}))) -> (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0})) {
  %p = (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0})) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %carried = ((bf16[512]{0}), bf16[1024]{0}) get-tuple-element(%p), index=2
  %w = bf16[1024]{0} all-gather-done(%carried)
  %shard = bf16[512]{0} slice(%w), slice={[0:512]}
  %ag-next = ((bf16[512]{0}), bf16[1024]{0}) all-gather-start(%shard), channel_id=1, replica_groups=[1,2]<=[2], dimensions={0}, use_global_device_ids=true, backend_config={"collective_backend_config":{"is_sync":false,"is_pipelined":true}}
  %ar-start = f32[256]{0} all-reduce-start(%w), channel_id=2, replica_groups={{0,1}}, to_apply=%add, backend_config="{\\"collective_backend_config\\":{\\"is_sync\\":true}}"
  %ar-done = f32[256]{0} all-reduce-done(%ar-start)
  ROOT %t = (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0})) tuple(%i, %w, %ag-next)
}

%cond (c: (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0}))) -> pred[] {
  %c = (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0})) parameter(0)
  ROOT %lt = pred[] constant(true)
}

ENTRY %main (a: bf16[512], b: f32[64], q: f32[8,8]) -> f32[8,8] {
  %a = bf16[512]{0} parameter(0)
  %b = f32[64]{0} parameter(1)
  %q = f32[8,8]{1,0} parameter(2)
  %ag-first = ((bf16[512]{0}), bf16[1024]{0}) all-gather-start(%a), channel_id=3, replica_groups=[1,2]<=[2], dimensions={0}, backend_config={"collective_backend_config":{"is_pipelined":true}}
  %zero = s32[] constant(0)
  %init = (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0})) tuple(%zero, %a, %ag-first)
  %loop = (s32[], bf16[1024]{0}, ((bf16[512]{0}), bf16[1024]{0})) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"8"}}
  %pair = ((bf16[512]{0}, f32[64]{0}), (bf16[1024]{0}, f32[128]{0})) all-gather-start(%a, %b), channel_id=4, replica_groups={{0,1}}, dimensions={0}
  %pair-done = (bf16[1024]{0}, f32[128]{0}) all-gather-done(%pair)
  %tok = token[] after-all()
  %send = (f32[8,8]{1,0}, u32[], token[]) send(%q, %tok), channel_id=5, frontend_attributes={_xla_send_recv_pipeline="0",_xla_send_recv_source_target_pairs={{0,1}}}
  %recv = (f32[8,8]{1,0}, u32[], token[]) recv(%tok), channel_id=5, frontend_attributes={_xla_send_recv_pipeline="0",_xla_send_recv_source_target_pairs={{0,1}}}
  %send-done = token[] send-done(%send), channel_id=5, frontend_attributes={_xla_send_recv_pipeline="0"}
  %recv-done = (f32[8,8]{1,0}, token[]) recv-done(%recv), channel_id=5, frontend_attributes={_xla_send_recv_pipeline="0"}
  ROOT %out = f32[8,8]{1,0} get-tuple-element(%recv-done), index=0
}
"""


@pytest.fixture()
def old_style(tmp_path: Path):
    path = tmp_path / "module_0001.jit_train_step.sm_9.0_gpu_after_optimizations.txt"
    path.write_text(OLD_STYLE)
    return analyze(tmp_path)


def test_start_done_pairs_count_once_with_the_result_size(old_style) -> None:
    ags = {c.name: c for c in old_style.of_kind("all-gather")}
    assert set(ags) == {"ag-next", "ag-first", "pair"}
    assert ags["pair"].shapes == ("bf16[1024]", "f32[128]") and ags["pair"].bytes == 1024 * 2 + 128 * 4
    assert ags["pair"].done == "pair-done" and not ags["pair"].crosses_iteration
    (ar,) = old_style.of_kind("all-reduce")
    assert ar.is_async and ar.done == "ar-done" and ar.bytes == 1024
    assert ar.collective_backend_config["is_sync"] is True and ar.scheduling["is_sync"] == "true"
    assert ar.loops == ("loop",) and ar.executions == 8


def test_starts_carried_through_the_loop_cross_iterations(old_style) -> None:
    ags = {c.name: c for c in old_style.of_kind("all-gather")}
    for name in ("ag-next", "ag-first"):  # their done is in the next iteration, reached through the tuple
        assert ags[name].crosses_iteration and ags[name].done is None and ags[name].is_pipelined
        assert ags[name].bytes == 2048  # without a matching done, the result half of (operand, result)
    assert ags["ag-next"].replica_groups.groups == ((0, 1),)
    assert old_style.summary()["all-gather"].crosses_iteration_count == 2


def test_send_recv_are_async_pipelined_point_to_point_ops(old_style) -> None:
    (send,) = old_style.of_kind("send")
    (recv,) = old_style.of_kind("recv")
    for op, done in ((send, "send-done"), (recv, "recv-done")):
        assert op.is_async and op.done == done and op.bytes == 8 * 8 * 4 and op.shapes == ("f32[8,8]",)
        assert op.scheduling["_xla_send_recv_pipeline"] == "0" and op.is_pipelined
        assert op.source_target_pairs == ((0, 1),)


BASE_BODY = """  %ag = ((bf16[512]{0}), bf16[1024]{0}) all-gather-start(%shard0), channel_id=1, replica_groups=[1,2]<=[2], dimensions={0}
  %w = bf16[1024]{0} all-gather-done(%ag)"""


def test_explain_with_a_winner_dump_reports_the_pipelined_pairs(tmp_path: Path, old_style) -> None:
    # The baseline gathers inside the iteration that uses the weights: start and done in the same body.
    text = OLD_STYLE.replace("  %w = bf16[1024]{0} all-gather-done(%carried)\n", "")
    text = text.replace("  %carried = ", "  %shard0 = bf16[512]{0} constant({...})\n" + BASE_BODY + "\n  %carried = ")
    text = text.replace(', backend_config={"collective_backend_config":{"is_pipelined":true}}', "")
    text = text.replace('"is_sync":false,"is_pipelined":true', '"is_sync":false')
    text = text.replace("tuple(%zero, %a, %ag-first)", "tuple(%zero, %a, %a)").replace("tuple(%i, %w, %ag-next)", "tuple(%i, %w, %w)")
    base_path = tmp_path / "base.txt"
    base_path.write_text(text)
    base = analyze(base_path)
    assert [c.crosses_iteration or c.is_pipelined for c in base.of_kind("all-gather")] == [False] * 4
    lines = explain({"xla": {"xla_gpu_enable_pipelined_all_gather": "true"}}, base, old_style)
    assert "pipelining moved 2 all-gather start/done pairs across loop iterations" in "\n".join(lines)
    same = explain({"xla_gpu_enable_pipelined_all_gather": True}, old_style, old_style)
    assert any("did not pipeline more" in line for line in same)
