"""Pre-flight against the jax installed here (real subprocesses; skipped where jax is absent)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from flagopt.flags import preflight

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed in this python")

GOOD = "--xla_gpu_enable_latency_hiding_scheduler=true"
REMOVED = "--xla_gpu_enable_async_collectives=true"
BAD_BOOL = "--xla_gpu_enable_while_loop_double_buffering=maybe"


@pytest.mark.slow
@needs_jax
def test_preflight_reports_removed_flags_and_bad_values() -> None:
    report = preflight(
        [[GOOD], [GOOD, REMOVED], [BAD_BOOL, "--xla_gpu_graph_level=0"]],
    )
    assert report.status == "failed"
    assert report.jaxlib_version is not None
    ok, removed, mixed = report.sets
    assert ok.ok and not ok.problems
    assert [p.flag for p in removed.problems] == [REMOVED]
    assert removed.problems[0].problem == "unknown"
    assert "removed in jaxlib 0.4.28" in removed.problems[0].message
    # The bad value hides the unknown flag from XLA's own message; pre-flight still finds both.
    kinds = {p.flag: p.problem for p in mixed.problems}
    assert kinds == {BAD_BOOL: "bad-value", "--xla_gpu_graph_level=0": "unknown"}
    assert "removed in jaxlib 0.7.2" in report.summary()


@pytest.mark.slow
@needs_jax
def test_preflight_passes_accepted_sets() -> None:
    report = preflight([[GOOD, "--xla_gpu_all_gather_combine_threshold_bytes=134217728"], []])
    assert report.status == "ok" and all(s.ok for s in report.sets)


@pytest.mark.slow
def test_preflight_without_jax_is_skipped_not_passed() -> None:
    report = preflight([[REMOVED]], python=[sys.executable, "-S"])  # -S: no site-packages, so no jax
    assert report.status == "skipped"
    assert "No module named 'jax'" in report.reason
    assert report.sets == () and report.problems == ()


def test_preflight_with_a_missing_interpreter_is_skipped() -> None:
    report = preflight([[GOOD]], python="/nonexistent/bin/python3")
    assert report.status == "skipped" and "cannot run" in report.reason
