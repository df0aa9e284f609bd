"""The HLO text reader: shapes, attributes, computations, and what it does with damaged input."""

from __future__ import annotations

from flagopt.evidence._hlo import attribute, decode_json_attr, parse_module, parse_shape, shape_bytes


def test_shape_bytes_counts_every_tuple_leaf_and_ignores_layouts_and_tokens() -> None:
    text = "((bf16[2048,16384]{1,0}), bf16[4096,16384]{1,0}, u32[], token[])"
    assert [str(s) for s in parse_shape(text)] == ["bf16[2048,16384]", "bf16[4096,16384]", "u32[]", "token[]"]
    assert shape_bytes(text) == 2048 * 16384 * 2 + 4096 * 16384 * 2 + 4


def test_shape_bytes_handles_dynamic_bounds_fp8_and_packed_subbyte() -> None:
    assert shape_bytes("f32[<=10,4]{1,0}") == 10 * 4 * 4
    assert shape_bytes("f8e4m3fn[64]{0}") == 64
    assert shape_bytes("s4[64]{0}") == 64  # unpacked: one byte per element
    assert shape_bytes("s4[64]{0:E(4)}") == 32


def test_attribute_reads_nested_values_without_splitting_inside_brackets_or_quotes() -> None:
    attrs = (
        "channel_id=3, replica_groups=mesh['a'=2,'b'=2] {'a'}, dimensions={0}, "
        'frontend_attributes={_xla_send_recv_pipeline="0",x="a, b"}, metadata={op_name="p[\\\'w\\\']"}'
    )
    assert attribute(attrs, "replica_groups") == "mesh['a'=2,'b'=2] {'a'}"
    assert attribute(attrs, "channel_id") == "3"
    assert attribute(attrs, "frontend_attributes") == '{_xla_send_recv_pipeline="0",x="a, b"}'
    assert attribute(attrs, "missing") is None


def test_backend_config_as_json_or_as_an_escaped_string() -> None:
    assert decode_json_attr('{"collective_backend_config":{"is_sync":true}}') == {
        "collective_backend_config": {"is_sync": True}
    }
    assert decode_json_attr('"{\\"is_sync\\":false}"') == {"is_sync": False}
    assert decode_json_attr("{not json") == {}


def test_unknown_opcodes_and_old_style_names_without_percent_are_read() -> None:
    text = (
        "HloModule m\n\nENTRY main {\n"
        "  p = f32[4]{0} parameter(0)\n"
        "  x = f32[4]{0} some-future-op(f32[4]{0} p), new_attr={1,2}\n"
        "  ROOT y = f32[4]{0} negate(x)\n}\n"
    )
    m = parse_module(text)
    assert [i.opcode for i in m.computations["main"].instrs] == ["parameter", "some-future-op", "negate"]
    assert m.computations["main"].instrs[1].operands == ["p"]
    assert not m.truncated and m.warnings == []


def test_a_file_cut_inside_a_computation_is_marked_truncated_with_a_warning(h200_text: str) -> None:
    cut = h200_text[: h200_text.index("%all-gather-start.3 =") + 40]
    m = parse_module(cut)
    assert m.truncated and m.entry is None
    assert any("region_2.3_spmd" in w for w in m.warnings)
    assert any("no ENTRY" in w for w in m.warnings)


def test_text_that_is_not_hlo_gives_an_empty_module_and_a_warning() -> None:
    m = parse_module("hello\nworld\n")
    assert m.computations == {} and m.warnings
