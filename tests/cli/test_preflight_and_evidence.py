"""CLI verbs end to end: pre-flight against the installed XLA, evidence on real dumps, a real JAX study."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from flagopt.cli import main
from flagopt.study import history, load_study

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hlo"
jax = pytest.importorskip("jax", reason="pre-flight and the reference workload need jax (pip install -e '.[jax]')")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.slow
def test_preflight_rejects_a_removed_flag_with_its_removal_version(tmp_path, capsys):
    space = write(tmp_path, """
        name: pf
        command: ["true"]
        params:
          async: {xla: xla_gpu_enable_async_collectives, choices: [true]}
          lhs: {xla: xla_gpu_enable_latency_hiding_scheduler, choices: [true, false]}
    """)
    assert main(["validate", "--space", str(space), "--preflight"]) == 2
    out = capsys.readouterr().out
    assert "--xla_gpu_enable_async_collectives=true" in out and "removed in jaxlib 0.4.28" in out
    assert "xla_gpu_enable_latency_hiding_scheduler" not in out.split("failed", 1)[1]  # known flags pass


@pytest.mark.slow
def test_baseline_the_installed_xla_rejects_stops_before_any_trial(tmp_path, capsys):
    space = write(tmp_path, """
        name: pfb
        command: ["true"]
        baseline: {xla_flags: "--xla_gpu_enable_async_all_gather=true"}
    """)
    storage = f"sqlite:///{tmp_path}/db/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "baseline-deployed cannot start" in err[0] and "0.4.28" in err[0]
    assert not (tmp_path / "db").exists()


@pytest.mark.slow
def test_preflight_says_which_xla_it_checked_when_the_trial_interpreter_cannot_be_asked(tmp_path, capsys):
    import subprocess
    import sys

    # A real interpreter without jax: a bare venv (the trial's python); and a command that is no python at all.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    params = "params: {async: {xla: xla_gpu_enable_async_collectives, choices: [true]}}"
    for command, why in ((f'["{tmp_path}/bare/bin/python", "train.py"]', "the trial's interpreter cannot start jax"),
                         ('["bash", "train.sh"]', "the command starts 'bash', not a Python interpreter")):
        space = write(tmp_path, f"name: pfi\ncommand: {command}\n{params}\n")
        assert main(["validate", "--space", str(space), "--preflight"]) == 2
        out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
        assert why in out, out
        assert f"checked flagopt's own jax {jax.__version__}" in out and "may not be the XLA the trial loads" in out
        assert f"({sys.executable}): failed" in out and "removed in jaxlib 0.4.28" in out


@pytest.mark.slow
def test_preflight_asks_the_trials_own_interpreter(tmp_path, capsys):
    import sys

    space = write(tmp_path, f"""
        name: pfo
        command: ["{sys.executable}", "train.py"]
        params: {{lhs: {{xla: xla_gpu_enable_latency_hiding_scheduler, choices: [true]}}}}
    """)
    assert main(["validate", "--space", str(space), "--preflight"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"pre-flight against jax {jax.__version__} / jaxlib" in out and f"({sys.executable}): ok" in out
    assert "checked flagopt's own" not in out


def test_a_missing_interpreter_path_stops_run_before_anything_is_written(tmp_path, capsys):
    space = write(tmp_path, f"""
        name: nopy
        command: [".venv-none/bin/python", "-m", "maxtext.trainers.pre_train.train"]
        workdir: {tmp_path}
    """)
    storage = f"sqlite:///{tmp_path}/db/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"command: .venv-none/bin/python does not exist (in workdir {tmp_path})" in err
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("fixture", ["h200x2_lm_fsdp", "h200x2_lm_pp", "h200x2_fsdp"])
def test_evidence_json_counts_match_the_dump(fixture, capsys):
    path = FIXTURES / fixture
    assert main(["evidence", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    text = next(path.glob("*.txt")).read_text()
    for kind in ("all-gather", "reduce-scatter", "all-reduce", "collective-permute"):
        # Every op of the kind as XLA wrote it, sync or the -start half of an async pair (counted once).
        written = len(re.findall(rf" {kind}(?:-start)?\(", text))
        assert sum(1 for c in doc["collectives"] if c["kind"] == kind) == written, kind


def test_evidence_table_suggests_brackets_on_the_gpu_dump(capsys):
    assert main(["evidence", str(FIXTURES / "h200x2_lm_fsdp")]) == 0
    out = capsys.readouterr().out
    assert "all-gather" in out and "xla_gpu_all_gather_combine_threshold_bytes" in out


@pytest.mark.slow
def test_a_real_jax_study_of_the_reference_workload(tmp_path):
    space = write(tmp_path, """
        name: jaxreal
        command: ["{python}", "-m", "flagopt.workloads.lm", "mode=fsdp", "layers=2", "d_model=64", "seq=32",
                  "batch=8", "dtype=f32", "host_devices=2", "steps=15"]
        baseline: {xla_flags: "--xla_gpu_enable_latency_hiding_scheduler=true",
                   defaults: {xla_gpu_enable_latency_hiding_scheduler: false}}
        profiles:
          f32_eigen: {xla: {xla_cpu_multi_thread_eigen: false}}
        stop: {max_trials: 3}
        noise: {max_repeats: 1, baseline_every: 100}  # CPU noise must not turn this into a confirmation test
    """)
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage, "--quiet"]) == 0
    records = history(load_study(storage, "jaxreal"))
    assert [r.kind for r in records] == ["baseline-deployed", "baseline-no-env", "profile"]
    for r in records:
        assert r.status == "ok", r.attrs.get("failure_reason")
        assert len(r.attrs["steps"]) == 15 and r.attrs["steady"] > 0
        assert r.attrs["run_info"]["num_devices"] == "2"
    assert records[1].attrs["xla_flags"].split()[-1] == "--xla_gpu_enable_latency_hiding_scheduler=false"


@pytest.mark.slow
def test_a_real_jax_study_takes_a_flag_that_compiles_to_the_deployed_program_as_no_effect(tmp_path, capsys):
    # On CPU a GPU flag changes nothing XLA emits; skipping the algebraic simplifier does. Each probe's first run is
    # dumped and compared with the evidence run's dump, then the dump is removed.
    space = write(tmp_path, """
        name: samejax
        command: ["{python}", "-m", "flagopt.workloads.lm", "mode=fsdp", "layers=2", "d_model=64", "seq=32",
                  "batch=8", "dtype=f32", "host_devices=2", "steps=15"]
        params:
          gpu_pipe: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
          no_simp: {xla: xla_disable_hlo_passes, choices: [algsimp]}
        evidence: true
        stop: {max_trials: 4}
        noise: {max_repeats: 1, baseline_every: 100}
    """)
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert main(["run", "--space", str(space), "--storage", storage]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "gpu_pipe=true: the deployed job's program" in out and "no_simp=algsimp: the deployed" not in out
    records = history(load_study(storage, "samejax"))
    assert [r.kind for r in records] == ["baseline-deployed", "evidence", "probe", "probe"]
    gpu, simp = records[2], records[3]
    assert gpu.attrs["same_program"] is True and "same program" in gpu.attrs["same_program_summary"]
    assert simp.attrs["same_program"] is False and "different programs" in simp.attrs["same_program_summary"]
    for probe in (gpu, simp):
        assert "--xla_dump_to=" in probe.attrs["xla_flags"]
        assert not (Path(probe.attrs["trial_dir"]) / "hlo").exists()  # compared, then removed
    assert (Path(records[1].attrs["trial_dir"]) / "hlo").is_dir()  # the deployed job's dump stays for the report
    assert main(["leaderboard", "samejax", "--storage", storage, "--json"]) == 0
    rows = {row["trial"]: row["verdict"] for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows[gpu.number] == "no effect (same program)" and rows[simp.number] != rows[gpu.number]
