"""Classing the misses of a benchmark run: what a pick lacks or carries against the true best, read from the
landscape's own model (win10: Tree +10 %, pipelined all-gather +0.5 %, a 128 MiB all-gather threshold +0.8 %, an
overlap limit of 2 -0.4 %)."""

from __future__ import annotations

import doctest
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

import benchmarks.misses as misses
from benchmarks._metrics import SeedResult
from benchmarks.misses import classify, differences, main
from flagopt.workloads.sim import load_landscape

ALGO, PAG = "NCCL_ALGO", "xla_gpu_enable_pipelined_all_gather"
AG, LIMIT = "xla_gpu_all_gather_combine_threshold_bytes", "xla_gpu_experimental_parallel_collective_overlap_limit"


def result(seed: int, pick: dict[str, Any] | None, *, landscape: str = "win10", family: str = "") -> SeedResult:
    land = load_landscape(landscape)
    gain = land.true_gain(pick or {})
    detail = {} if pick is None else {"settings": pick}
    return SeedResult(landscape=landscape, strategy="flagopt", seed=seed, runs=40, true_gain=gain,
                      best_gain=land.best().gain, claimed_gain=gain, verdict="win", recommends=True, detail=detail,
                      family=family)


def write(path: Path, results: list[SeedResult]) -> Path:
    path.write_text(json.dumps([{**asdict(r), "within_1pct": r.within_1pct} for r in results]))
    return path


def test_a_pick_carrying_a_costly_setting_is_a_passenger_miss() -> None:
    land = load_landscape("win10")
    pick = {ALGO: "Tree", PAG: True, LIMIT: 2}
    diffs = {d.name: d for d in differences(land, pick)}
    assert diffs[LIMIT].kind == "passenger" and diffs[LIMIT].repaired > land.true_gain(pick)
    assert diffs[AG].kind == "companion" and diffs[AG].alone > 0
    assert PAG not in diffs and ALGO not in diffs  # the pick sets them as the best does
    assert classify(list(diffs.values()), land.best().gain) in ("passenger", "companion")


def test_a_threshold_at_another_level_is_a_level_miss() -> None:
    land = load_landscape("win10")
    pick = {ALGO: "Tree", PAG: True, AG: 1048576}
    diffs = {d.name: d for d in differences(land, pick)}
    assert diffs[AG].kind == "level"
    assert classify(list(diffs.values()), land.best().gain) == "level"


def test_a_value_that_pays_only_beside_the_pick_is_company() -> None:
    # pair: two flags that each do nothing or hurt alone and pay together
    land = load_landscape("pair")
    best = {k: v for k, v in land.best().settings.items() if v is not None}
    diffs = differences(land, {})
    company = [d for d in diffs if d.kind == "company"]
    assert company, diffs
    assert all(d.alone < misses.ALONE_PAYS for d in company)
    assert all(d.best == land.resolve(best)[d.name] for d in company)


def test_a_miss_no_single_change_repairs_is_several() -> None:
    land = load_landscape("win10")
    assert classify(differences(land, {}), land.best().gain) == "several"  # the +10 % Tree and more are missing


def test_the_report_rows_every_miss_and_counts_the_classes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write(tmp_path / "r.json", [result(0, {ALGO: "Tree", PAG: True, AG: 134217728}),  # the best: no miss
                                       result(1, {ALGO: "Tree", PAG: True, AG: 1048576, LIMIT: 4}),
                                       result(2, {ALGO: "Tree", LIMIT: 4}),
                                       result(3, None)])  # an older file: no settings kept
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 of 4 flagopt studies")
    assert "| win10 | 4 | 3 | 0 | 0 | 1 | 0 | 0 | 1 | 1 |" in out  # passenger, several, unknown
    assert "re-run with this checkout's decisions.py" in out


def test_results_without_the_strategy_are_one_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path / "r.json", [result(0, {ALGO: "Tree"})])
    with pytest.raises(SystemExit, match="no manual results"):
        main([str(path), "--strategy", "manual"])


def test_its_docstring_example_runs() -> None:
    outcome = doctest.testmod(misses, report=False)
    assert outcome.attempted >= 1 and outcome.failed == 0
