"""The reference workload, run for real: each mode in a subprocess, on 2-4 fake CPU devices."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flagopt.errors import EXIT_USAGE, FlagoptError
from flagopt.workloads.lm import main, parse_args

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"completed step: (\d+), seconds: ([\d.]+), TFLOP/s/device: ([\d.]+), "
                  r"Tokens/s/device: ([\d.]+), total_weights: (\d+), loss: ([-\w.]+)")
TINY = ["layers=8", "d_model=32", "heads=4", "seq=16", "batch=8", "vocab=64", "dtype=f32", "host_devices=4"]
RUNS = {
    "fsdp": ["mode=fsdp"],
    "tp": ["mode=tp"],  # run with XLA_FLAGS asking for 2 devices: the caller's flag must win
    "pp_m2": ["mode=pp", "num_pipeline_microbatches=2", "stages=4"],
    "pp_m4": ["mode=pp", "num_pipeline_microbatches=4", "stages=4"],
    "pp_circular": ["mode=pp", "num_pipeline_microbatches=4", "stages=8"],
}


def _env(xla_flags: str = "") -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    env["XLA_FLAGS"] = xla_flags
    return env


@pytest.fixture(scope="module")
def outputs() -> dict[str, subprocess.CompletedProcess[str]]:
    # Started together so the whole module costs about one run's wall time on a multi-core machine.
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "flagopt.workloads.lm", *TINY, *args],
            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=_env("--xla_force_host_platform_device_count=2" if name == "tp" else ""))
        for name, args in RUNS.items()
    }
    done = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, "")
    return done


def _steps(text: str) -> list[tuple[int, float, float, float, int, float]]:
    return [(int(a), float(b), float(c), float(d), int(e), float(f)) for a, b, c, d, e, f in STEP.findall(text)]


def _info(text: str, prefix: str) -> dict[str, str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(prefix))
    return dict(word.split("=", 1) for word in line[len(prefix):].split())


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_each_mode_trains_for_15_steps(outputs: dict, name: str) -> None:
    run = outputs[name]
    assert run.returncode == 0, run.stdout[-3000:]
    steps = _steps(run.stdout)
    assert [s[0] for s in steps] == list(range(15))
    assert all(math.isfinite(s[5]) for s in steps)
    assert all(s[1] > 0 and s[3] > 0 for s in steps)
    assert {s[4] for s in steps} == {8 * 16}  # batch * seq tokens per step
    assert steps[-1][5] < steps[0][5]  # it learns
    assert "System Information: Jax Backend: cpu" in run.stdout


@pytest.mark.slow
def test_caller_xla_flags_win_over_host_devices(outputs: dict) -> None:
    assert "Num_devices: 2," in outputs["tp"].stdout
    assert "Num_devices: 4," in outputs["fsdp"].stdout


@pytest.mark.slow
def test_all_layouts_compute_the_same_model(outputs: dict) -> None:
    # Same seed, same network: sharding, pipelining and microbatching must not change the maths.
    first_two = {name: [s[5] for s in _steps(run.stdout)[:2]] for name, run in outputs.items()}
    reference = first_two["fsdp"]
    for name, losses in first_two.items():
        assert losses == pytest.approx(reference, abs=2e-3), name


@pytest.mark.slow
def test_pp_honours_microbatches_and_stages(outputs: dict) -> None:
    m2, m4, circ = (_info(outputs[n].stdout, "Pipeline: ") for n in ("pp_m2", "pp_m4", "pp_circular"))
    assert (m2["num_pipeline_microbatches"], m4["num_pipeline_microbatches"]) == ("2", "4")
    assert (m2["microbatch_size"], m4["microbatch_size"]) == ("4", "2")
    # More microbatches: more stage iterations, a smaller bubble share.
    assert int(m4["iterations"]) > int(m2["iterations"])
    assert float(m4["bubble_fraction"]) < float(m2["bubble_fraction"])
    assert (circ["stages"], circ["repeats"]) == ("8", "2")
    assert float(circ["bubble_fraction"]) < float(m4["bubble_fraction"])


@pytest.mark.slow
def test_layout_error_exits_2_naming_the_key() -> None:
    run = subprocess.run([sys.executable, "-m", "flagopt.workloads.lm", "mode=tp", "heads=3", "d_model=48",
                          "host_devices=2"], cwd=ROOT, env=_env(), text=True, capture_output=True, timeout=120)
    assert run.returncode == EXIT_USAGE
    assert "heads" in run.stderr.strip().splitlines()[-1]
    assert "completed step" not in run.stdout


def test_bad_argument_exits_2_naming_the_key() -> None:
    run = subprocess.run([sys.executable, "-m", "flagopt.workloads.lm", "num_pipeline_microbatches=zero"],
                         cwd=ROOT, env=_env(), text=True, capture_output=True, timeout=60)
    assert run.returncode == EXIT_USAGE
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "num_pipeline_microbatches" in lines[0] and "integer" in lines[0]


@pytest.mark.parametrize(("argv", "key"), [
    (["bogus=1"], "bogus"),
    (["mode=dp"], "mode"),
    (["dtype=fp8"], "dtype"),
    (["layers=0"], "layers"),
    (["lr=-1"], "lr"),
    (["remat=maybe"], "remat"),
    (["heads=5"], "heads"),
    (["steps"], "steps"),
])
def test_parse_args_rejects(argv: list[str], key: str) -> None:
    with pytest.raises(FlagoptError) as err:
        parse_args(argv)
    assert key in err.value.message


def test_parse_args_later_repeat_wins_and_defaults() -> None:
    config = parse_args(["num_pipeline_microbatches=4", "d_model=64", "num_pipeline_microbatches=16", "remat=off"])
    assert config.num_pipeline_microbatches == 16
    assert config.ff == 4 * 64 and config.remat is False
    assert parse_args(["d_ff=100"]).ff == 100


def test_main_reports_usage_errors_without_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["seq=abc"]) == EXIT_USAGE
    assert "seq" in capsys.readouterr().err


@pytest.mark.slow
def test_config_line_round_trips(outputs: dict) -> None:
    line = next(ln for ln in outputs["pp_m2"].stdout.splitlines() if ln.startswith("Config: "))
    echoed = parse_args(line.removeprefix("Config: ").split())
    assert echoed == parse_args([*TINY, *RUNS["pp_m2"], "d_ff=128"])
