"""Pooling seed sets of ``decisions.py --json``: the files round-trip, a seed counts once, shares get intervals."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks._metrics import SeedResult
from benchmarks.pooled import Share, load, main, shares, wilson


def result(seed: int, *, landscape: str = "win10", true_gain: float = 0.113, verdict: str = "win",
           family: str = "") -> SeedResult:
    return SeedResult(landscape=landscape, strategy="flagopt", seed=seed, runs=40, true_gain=true_gain,
                      best_gain=0.113 if landscape == "win10" else 0.0, claimed_gain=true_gain, verdict=verdict,
                      recommends=verdict == "win", controls=5, ci=(true_gain - 0.01, true_gain + 0.01), family=family)


def write(path: Path, results: list[SeedResult]) -> Path:
    # the shape decisions.py writes: the dataclass fields plus the derived within_1pct
    path.write_text(json.dumps([{**asdict(r), "within_1pct": r.within_1pct} for r in results]))
    return path


def test_two_seed_sets_pool_into_one_share_per_target(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", [result(s) for s in range(3)])
    b = write(tmp_path / "b.json", [result(100, true_gain=0.09), result(101)])
    pooled = load([a, b])
    assert len(pooled) == 5 and pooled[0].ci == pytest.approx((0.103, 0.123))
    within = next(s for s in shares(pooled, "flagopt") if s.name.startswith("win10: within"))
    assert (within.hits, within.seeds) == (4, 5)


def test_a_seed_in_two_files_is_refused(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", [result(0)])
    b = write(tmp_path / "b.json", [result(0)])
    with pytest.raises(SystemExit, match="b.json: flagopt on win10 seed 0 is also in an earlier file"):
        load([a, b])


def test_a_file_that_is_not_a_results_list_names_itself(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"win10": 1}')
    with pytest.raises(SystemExit, match="bad.json: not a decisions.py --json file"):
        load([bad])


def test_the_status_says_which_side_of_the_target_the_interval_is_on() -> None:
    assert wilson(30, 30)[0] > 0.88 and wilson(0, 30)[1] < 0.12
    assert Share("x", 0.85, True, 150, 150).status == "met"
    assert Share("x", 0.85, True, 90, 150).status == "missed"
    assert Share("x", 0.85, True, 124, 150).status == "open, short of it"
    assert Share("x", 0.85, True, 130, 150).status == "open, on target"
    assert Share("x", 0.02, False, 2, 150).status == "open, on target"
    assert Share("x", 0.02, False, 30, 150).status == "missed"
    # no recommendation at all on a null job: a count, met by none in >= 50 seeds
    assert Share("x", 0.0, False, 0, 50).status == "met"
    assert Share("x", 0.0, False, 0, 30).status == "open"
    assert Share("x", 0.0, False, 1, 250).status == "missed"


def test_the_command_prints_and_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.json", [result(s) for s in range(4)]
              + [result(s, landscape="rand-win-7", family="rand-win") for s in range(2)])
    out = tmp_path / "pooled.md"
    assert main([str(a), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text == out.read_text()
    assert "| win10: within 1 % of the true best | >= 85% | 4/4 = 100.0%" in text
    assert "rand-win: null verdict" in text  # a family is pooled under its own name
    assert "Median runs: win10 40, rand-win 40." in text
