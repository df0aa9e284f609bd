"""Issue 22: a pre-flight jax start that times out (a busy login node) is "could not check", never a rejection."""

from __future__ import annotations

import sys
import textwrap

from flagopt.flags import preflight

TOKEN = "--xla_gpu_all_gather_combine_threshold_bytes=8589934592"


def slow_python(tmp_path, seconds: float):
    """An interpreter whose jax start takes ``seconds`` longer when XLA_FLAGS is set (as under load)."""
    script = tmp_path / "slowpy"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys, time
        if os.environ.get("XLA_FLAGS"):
            time.sleep({seconds})
        os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])
    """))
    script.chmod(0o755)
    return str(script)


def test_a_slow_jax_start_is_retried_with_a_longer_limit_not_blamed_on_the_flag(tmp_path):
    report = preflight([[TOKEN]], python=slow_python(tmp_path, 6), timeout_s=5)
    assert report.status == "ok", report.summary()
    assert not report.problems


def test_a_jax_start_that_never_comes_in_time_leaves_the_flags_unchecked(tmp_path, monkeypatch):
    monkeypatch.setattr("flagopt.flags._preflight.RETRY_TIMEOUT_S", 6.0, raising=False)
    report = preflight([[TOKEN]], python=slow_python(tmp_path, 30), timeout_s=5)
    assert report.status != "failed" and not report.problems, report.summary()
    assert "rejects" not in report.summary() and "not checked" in report.summary()
