"""The shipped flag registry agrees with the measured presence matrix and answers lookups."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from flagopt.errors import FlagoptError
from flagopt.flags import FlagRegistry, version_tuple

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"


def presence() -> tuple[list[str], list[dict[str, str]]]:
    text = (FIXTURES / "xla_flag_presence_by_jaxlib.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    versions = [key.split("_", 1)[1] for key in rows[0] if key.startswith("jaxlib_")]
    return versions, rows


def test_registry_reproduces_every_cell_of_the_presence_matrix() -> None:
    registry = FlagRegistry.load()
    versions, rows = presence()
    assert registry.tested_jaxlib == tuple(versions)
    for row in rows:
        for version in versions:
            accepted = row[f"jaxlib_{version}"] in "Y?"  # "?" = the flag exists, the test value crashed
            assert registry.accepted_by(row["flag"], version) == accepted, (row["flag"], version)


def test_removal_notes() -> None:
    registry = FlagRegistry.load()
    assert registry.removal_note("--xla_gpu_enable_async_collectives=true").startswith("removed in jaxlib 0.4.28")
    assert registry.removal_note("xla_gpu_graph_level").startswith("removed in jaxlib 0.7.2")
    assert "renamed to xla_gpu_enable_dynamic_slice_fusion" in registry.removal_note(
        "xla_gpu_enable_address_computation_fusion"
    )
    assert registry.removal_note("xla_gpu_enable_latency_hiding_scheduler") is None
    assert registry.removal_note("xla_not_a_flag") is None
    assert registry.removal_note("xla_gpu_pipeline_all_gather").startswith("not accepted by any tested jaxlib")


def test_defaults_and_lookups() -> None:
    registry = FlagRegistry.load()
    assert registry.default("xla_gpu_all_gather_combine_threshold_bytes") == str(30 * 1024 * 1024 + 7)
    assert registry.default("--xla_gpu_enable_latency_hiding_scheduler=true") == "false"
    assert registry.default("xla_gpu_enable_async_collectives") is None
    assert "xla_gpu_autotune_level" in registry and "xla_nope" not in registry
    info = registry.get("xla_gpu_collective_permute_combine_threshold_bytes")
    assert info is not None and info.first_accepted == "0.5.3"
    assert registry.added_note("xla_gpu_collective_permute_combine_threshold_bytes") == "added in jaxlib 0.5.3"


def test_versions_outside_the_tested_range() -> None:
    registry = FlagRegistry.load()
    assert registry.status("xla_gpu_enable_latency_hiding_scheduler", "0.12.0") == "accepted"
    assert registry.status("xla_gpu_enable_async_collectives", "0.12.0") == "removed"
    assert registry.status("xla_gpu_enable_async_collectives", "0.4.26") == "unknown"  # between two tested wheels
    assert registry.status("xla_gpu_pipeline_all_gather", "0.12.0") == "unknown"  # may exist in untested wheels
    assert registry.status("xla_gpu_pipeline_all_gather", "0.9.0") == "not-yet"
    assert registry.accepted_by("xla_completely_unknown", "0.10.2")
    assert version_tuple("0.4.36.dev20241201") == (0, 4, 36)


@pytest.mark.parametrize(
    ("flag", "value", "bad"),
    [
        ("xla_gpu_enable_latency_hiding_scheduler", "FALSE", False),
        ("xla_gpu_enable_latency_hiding_scheduler", "1", False),
        ("xla_gpu_enable_latency_hiding_scheduler", "maybe", True),
        ("xla_gpu_all_gather_combine_threshold_bytes", "-5", False),
        ("xla_gpu_all_gather_combine_threshold_bytes", "1e3", True),
        ("xla_gpu_all_gather_combine_threshold_bytes", "0x10", True),
        ("xla_gpu_enable_while_loop_unrolling", "BOGUS", True),
        ("xla_unknown", "anything", False),
    ],
)
def test_check_value_matches_what_xla_accepts(flag: str, value: str, bad: bool) -> None:
    """Expectations measured with jaxlib 0.10.2 (see the value-errors fixture and the preflight test)."""
    assert (FlagRegistry.load().check_value(flag, value) is not None) == bad


def test_a_user_csv_adds_and_overrides_rows(tmp_path: Path) -> None:
    shipped = FlagRegistry.load()
    header = "name,type,xla_default,valid_values,first_accepted,last_accepted,removed_in,renamed_to,note\n"
    extra = tmp_path / "site_flags.csv"
    extra.write_text(header + "xla_gpu_site_flag,bool,false,true|false,0.9.0,0.10.2,,,our fork\n"
                     "xla_gpu_autotune_level,int,5,0..5,0.4.20,0.10.2,,,site default\n")  # fmt: skip
    registry = FlagRegistry.load(extra)
    assert len(registry) == len(shipped) + 1
    assert registry.default("xla_gpu_autotune_level") == "5"
    assert not registry.accepted_by("xla_gpu_site_flag", "0.8.0")


def test_a_malformed_user_csv_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("flag,default\nx,1\n")
    with pytest.raises(FlagoptError) as info:
        FlagRegistry.load(bad)
    assert info.value.source == str(bad)
