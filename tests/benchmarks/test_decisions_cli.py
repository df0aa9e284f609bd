"""decisions.py end to end on one seed: every strategy runs, the write-up carries every section and keeps notes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks.decisions import main, parse_args


def test_quick_means_flagopt_alone_on_the_shipped_landscapes() -> None:
    args = parse_args(["--quick"])
    assert args.strategies == ["flagopt"] and args.seeds == 3 and args.families == []
    assert "ppmb" in args.landscapes and "flaky" in args.landscapes
    assert parse_args(["--quick", "--seeds", "5"]).seeds == 5
    args = parse_args(["--seeds", "30", "--null-seeds", "50"])
    assert (args.seeds, args.held_out_seeds, args.null_seeds) == (30, 30, 50)


def test_one_seed_of_every_strategy_writes_the_write_up(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    out.write_text("old\n<!-- notes -->\nkept by hand\n<!-- /notes -->\n")
    code = main(["--seeds", "1", "--landscapes", "pair", "--families", "rand-below", "--jobs", "1",
                 "--max-trials", "30", "--out", str(out)])
    assert code == 0
    text = out.read_text()
    optional = ("skopt",) if importlib.util.find_spec("skopt") else ()  # the `bench` extra
    if not optional:
        assert "scikit-optimize is not installed" in text
    for strategy in ("flagopt", "flagopt-eq", "flagopt-1.5x", "manual", "manual-x3", "random", "tpe", "tpe-repeats",
                     *optional):
        assert f"| pair | {strategy} |" in text and f"| rand-below | {strategy} |" in text
    assert "## Results: held-out random landscapes" in text and "## Targets (issue 25)" in text
    assert "pair: win verdict" in text and "kept by hand" in text


def test_flagopt_eq_is_held_to_the_manual_protocols_launches(tmp_path: Path) -> None:
    """The equal-budget strategy: flagopt with stop.max_trials = the manual protocol's launches on the same seed."""
    out = tmp_path / "bench.json"
    code = main(["--seeds", "1", "--first-seed", "3", "--landscapes", "win10", "--families", "--jobs", "1",
                 "--strategies", "flagopt", "flagopt-eq", "manual", "--json", str(out),
                 "--out", str(tmp_path / "bench.md")])
    assert code == 0
    runs = {r["strategy"]: r["runs"] for r in json.loads(out.read_text())}
    assert runs["flagopt-eq"] <= runs["manual"] < runs["flagopt"]


def test_flagopt_told_confirms_the_true_best_as_its_one_profile(tmp_path: Path) -> None:
    """The bound for the confirmation alone: told the answer, the study races it against the deployed job."""
    from benchmarks.decisions import told_space
    from flagopt.workloads.sim import load_landscape

    assert told_space(load_landscape("null")) is None  # nothing to tell: the deployed job is the best
    out = tmp_path / "bench.json"
    code = main(["--seeds", "1", "--landscapes", "win10", "null", "--families", "--jobs", "1",
                 "--strategies", "flagopt-told", "--json", str(out), "--out", str(tmp_path / "bench.md")])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [r["landscape"] for r in rows] == ["win10"]
    (told,) = rows
    assert told["verdict"] == "win" and told["within_1pct"] and told["runs"] <= 15
    assert "flagopt-told skipped on null" in (tmp_path / "bench.md").read_text()


def test_stop_rules_other_than_the_defaults_reach_every_flagopt_study(tmp_path: Path) -> None:
    """``--stop refine=0``: the study ends at its first confirmed winner, in fewer runs than with the default."""
    assert parse_args(["--stop", "refine=0", "win=0.04"]).stop == [("refine", 0), ("win", 0.04)]
    for bad in ("refine", "refin=3", "max_trials=30", "refine=ten", "refine=-1", "max_null=0"):
        with pytest.raises(SystemExit):
            parse_args(["--stop", bad])
    runs = {}
    for name, extra in (("default", []), ("first", ["--stop", "refine=0"])):
        out = tmp_path / f"{name}.json"
        assert main(["--seeds", "1", "--first-seed", "3", "--landscapes", "win10", "--families", "--jobs", "1",
                     "--strategies", "flagopt", "--json", str(out), *extra]) == 0
        (row,) = json.loads(out.read_text())
        assert row["verdict"] == "win"
        runs[name] = row["runs"]
    assert runs["first"] < runs["default"]
