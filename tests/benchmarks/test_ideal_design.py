"""ideal_design.py: the idealised balanced design's pick, its scoring, and the command's table."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.ideal_design import levels, main, manual_runs, pick, share_within, within_1pct
from flagopt.workloads.sim import load_landscape


def test_its_levels_are_the_manual_protocols_grid_without_the_rejected_flags() -> None:
    land = load_landscape("win10")
    grid = levels(land)
    deployed = land.resolve({})
    assert all(values[0] == deployed[name] for name, values in grid.items())
    assert set(grid["NCCL_ALGO"][1:]) == {"Ring", "Tree", "NVLS", "CollnetDirect"}
    # the manual protocol's launches on the same landscape: baselines, one run per other value, the combination
    assert manual_runs(land) == 2 + sum(len(v) - 1 for v in grid.values()) + 1


def test_without_noise_the_fit_finds_the_additive_best_and_noise_makes_it_miss() -> None:
    land = load_landscape("win10")
    exact = pick(land, 60, np.random.default_rng(1), noise=0.0)
    assert exact["NCCL_ALGO"] == "Tree" and within_1pct(land, exact)
    rng = np.random.default_rng(2)
    noisy = [within_1pct(land, pick(land, 12, rng, noise=0.05)) for _ in range(40)]
    assert sum(noisy) < 30  # 5 % run noise over 12 runs cannot resolve the +0.5-0.8 % settings


def test_more_runs_decide_better() -> None:
    land = load_landscape("win10")
    few = share_within([land], 1.0, 200, seed=3)
    many = share_within([land], 3.0, 200, seed=3)
    assert many > few + 0.15


def test_a_pick_that_runs_out_of_memory_is_a_miss() -> None:
    land = load_landscape("oomcliff")
    best = dict(land.best().settings)
    assert within_1pct(land, best)
    assert not within_1pct(land, {**best, "xla_gpu_enable_pipelined_reduce_scatter": True})


def test_the_command_prints_one_row_per_landscape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--landscapes", "win10", "pair", "--multiples", "1", "2", "--reps", "20"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[0] == "| landscape | manual runs | x1 | x2 |"
    assert [r.split("|")[1].strip() for r in rows[1:]] == ["win10", "pair"]
    assert all(cell.strip().endswith("%") for r in rows[1:] for cell in r.strip("|").split("|")[2:])


def test_its_docstring_example_runs() -> None:
    import doctest

    import benchmarks.ideal_design as module

    result = doctest.testmod(module, report=False)
    assert result.attempted >= 3 and result.failed == 0
