"""The claims of a benchmark run before and after a budget pick's pull, read from one decisions.py JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks._flagopt_run import run_flagopt
from benchmarks.claims import main, table
from flagopt.workloads.sim import load_landscape


def row(landscape: str, verdict: str, claim: float, ci: list[float], truth: float,
        own: tuple[float, list[float]] | None = None) -> dict[str, Any]:
    detail = {"selection": {"fresh_runs_gain": own[0], "fresh_runs_ci": own[1], "among": 3}} if own else {}
    return {"landscape": landscape, "family": "", "strategy": "flagopt", "verdict": verdict, "recommends": True,
            "claimed_gain": claim, "ci": ci, "true_gain": truth, "detail": detail}


def test_a_pulled_pick_is_read_before_and_after_and_a_win_is_the_same_in_both():
    rows = [row("below", "budget", 0.043, [0.034, 0.052], 0.038, own=(0.051, [0.042, 0.060])),
            row("below", "budget", 0.02, [0.01, 0.03], 0.022),
            row("win", "win", 0.10, [0.08, 0.12], 0.11)]
    lines = table(rows)
    below = next(line for line in lines if line.startswith("| below |"))
    # before: +5.1 % claimed for a true +3.8 % (outside its interval, a false +5 % claim); after: +4.3 %, covering
    assert below == "| below | 2 | 1 | 1/2 cover, +0.55 pp, 1 false +5 % | 2/2 cover, +0.15 pp, 0 false +5 % |"
    wins = next(line for line in lines if line.startswith("| all wins |"))
    assert wins.endswith("| 1/1 cover, -1.00 pp, 0 false +5 % | 1/1 cover, -1.00 pp, 0 false +5 % |")


def test_a_real_run_records_the_fresh_runs_reading_and_the_table_reads_it(tmp_path: Path, capsys):
    land = load_landscape("below5")
    choice = run_flagopt(land, 0, tmp_path / "study")
    pulled = choice.detail["selection"]
    assert pulled["fresh_runs_gain"] > choice.claimed_gain and pulled["among"] >= 2
    results = tmp_path / "r.json"
    results.write_text(json.dumps([{"landscape": "below5", "family": "", "strategy": "flagopt", "verdict": "budget",
                                    "recommends": True, "claimed_gain": choice.claimed_gain, "ci": choice.detail["ci"],
                                    "true_gain": land.true_gain(choice.settings), "detail": choice.detail}],
                                   default=str))
    assert main([str(results)]) == 0
    assert "| below5 | 1 | 1 |" in capsys.readouterr().out
    assert main([str(results), "--strategy", "manual"]) == 1  # nothing of that strategy: said, and a failing exit
    assert "no claim of 'manual'" in capsys.readouterr().err
