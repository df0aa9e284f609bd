"""The landscape fitted to the real 2xH200 runs in the benchmark: its space offers the catalog's profiles, the
engineer's protocol runs them, and the calibration script reproduces the shipped numbers from the measurements."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks._baselines import manual_protocol
from benchmarks._spaces import space_data, write_space
from flagopt.workloads.sim import load_landscape

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT.parent / "shared" / "measurements"


def test_its_space_offers_the_catalog_profiles_and_only_the_tunable_params(tmp_path: Path) -> None:
    land = load_landscape("h200x2-measured")
    data = space_data(land, 0)
    assert set(data["profiles"]) == set(land.profiles) and "jax_toolbox_llm" in data["profiles"]
    assert "xla_gpu_enable_triton_gemm" not in data["params"]
    space = write_space(land, 0, tmp_path)  # the real loader takes it
    recipe = next(p for p in space.profiles if p.profile == "jax_toolbox_llm")
    assert dict(recipe.xla)["xla_gpu_enable_triton_gemm"] is False
    assert "profiles" not in space_data(load_landscape("win10"), 0)


def test_the_engineers_protocol_runs_each_profile_once_before_its_one_factor_waves() -> None:
    land = load_landscape("h200x2-measured")
    choice = manual_protocol(land, 0)
    log = choice.detail["log"]
    first = [dict(run.settings) for run in log[2:2 + len(land.profiles)]]
    assert first[-1]["xla_gpu_enable_triton_gemm"] is False  # the recipe, in the catalog's order
    assert not any("xla_gpu_enable_triton_gemm" in run.settings for run in log[2 + len(land.profiles):])


@pytest.mark.skipif(not MEASUREMENTS.is_dir(), reason="../shared/measurements is not beside this checkout")
def test_the_calibration_script_reproduces_the_shipped_landscape() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks/calibrate_measured.py"), "--measurements",
                          str(MEASUREMENTS)], capture_output=True, text=True, check=True, timeout=300).stdout
    fitted = yaml.safe_load(out[out.index("effects (values):"):])
    land = load_landscape("h200x2-measured")
    for param, values in fitted["effects (values)"].items():
        for value, effect in values.items():
            assert land.params[param].effect["values"][value] == pytest.approx(effect, abs=2e-4), (param, value)
    assert land.pool["gain"] == pytest.approx(fitted["pool"]["gain"], abs=2e-4)
    assert [m["share"] for m in land.pool["hides"]] == pytest.approx([m["share"] for m in fitted["pool"]["hides"]],
                                                                      abs=2e-3)
    assert [i["gain"] for i in land.interactions] == pytest.approx([i["gain"] for i in fitted["interactions"]],
                                                                    abs=2e-4)
    assert "rms residual" in out
