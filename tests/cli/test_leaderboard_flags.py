"""The leaderboard's flags column: what a row changes by short names and readable sizes; the full flags with --wide."""

from __future__ import annotations

import textwrap

from flagopt.cli import main
from flagopt.study import compact_settings, param_names, short_flag_names

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.005"]'
AG = "xla_gpu_all_gather_combine_threshold_bytes"
LHS = "xla_gpu_enable_latency_hiding_scheduler"


def test_short_names_are_unique_tails_of_the_flag_names() -> None:
    short = short_flag_names([AG, "xla_gpu_reduce_scatter_combine_threshold_bytes", LHS, "xla_cpu_multi_thread_eigen"])
    assert short == {AG: "gather_combine_threshold", "xla_gpu_reduce_scatter_combine_threshold_bytes":
                     "scatter_combine_threshold", LHS: "scheduler", "xla_cpu_multi_thread_eigen": "eigen"}
    assert short_flag_names([AG]) == {AG: "threshold"}  # alone in the table, one word says which


def test_sizes_are_readable_and_param_names_win() -> None:
    assert compact_settings({"xla": {AG: 31457287}}) == "threshold=30.0 MiB"
    names = param_names({"params": {"ag_threshold": {"xla": AG, "type": "int"}, "tps": {"arg": "tokens_per_s"}}})
    settings = {"xla": {AG: 1468006, LHS: True}, "env": {"NCCL_PROTO": "Simple"}, "args": {"tokens_per_s": 51000},
                "libtpu": {}}
    assert compact_settings(settings, names) == \
        "ag_threshold=1.4 MiB, scheduler=true, NCCL_PROTO=Simple, tps=51000"
    assert compact_settings({"xla": {"xla_gpu_threshold_for_windowed_einsum_mib": 64}}) == "einsum=64 MiB"
    assert compact_settings(None) == compact_settings({}) == ""


def test_leaderboard_shows_short_settings_and_full_flags_with_wide(tmp_path, capsys, monkeypatch) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent(f"""
        name: flagcol
        command: {FAULTY}
        profiles:
          combined: {{xla: {{{AG}: 1468006, {LHS}: true}}, env: {{NCCL_PROTO: Simple}}}}
        stop: {{max_trials: 3}}
    """))
    storage = f"sqlite:///{tmp_path}/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["leaderboard", "flagcol", "--storage", storage]) == 0
    short = capsys.readouterr().out
    assert main(["leaderboard", "flagcol", "--storage", storage, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "threshold=1.4 MiB, scheduler=true, NCCL_PROTO=Simple" in short
    assert AG not in short
    for token in (f"--{AG}=1468006", f"--{LHS}=true", "NCCL_PROTO=Simple"):  # rich may fold between tokens
        assert token in wide
