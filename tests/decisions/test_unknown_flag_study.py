"""A flag the job's XLA does not know, offered as a range: one aborted run, then none of its values again.

The real driver on a simulated job (SimExecutor) whose jaxlib rejects ``xla_gpu_memory_limit_slop_factor``, offered
as an int range of five probe values with a +3 % effect the job can never get.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from flagopt.workloads.sim import LANDSCAPES, landscape_from_data
from tests.decisions.sim_study import run_study

SLOP = "xla_gpu_memory_limit_slop_factor"


def _landscape(folder: Path):
    data = copy.deepcopy(yaml.safe_load(Path(LANDSCAPES).read_text())["win10"])
    data["params"][SLOP] = {"target": "xla", "type": "int", "low": 80, "high": 120, "default": 95,
                            "effect": {"values": {110: 0.03}}}
    data["unknown_flags"] = [*data.get("unknown_flags", []), SLOP]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "landscapes.yaml"
    path.write_text(yaml.safe_dump({"win10-slop": data}))
    return landscape_from_data("win10-slop", data, path)


def test_one_abort_on_an_unknown_flag_leaves_every_value_of_it_out(tmp_path):
    land = _landscape(tmp_path / "landscape")
    # the truth cannot set it either: the true best keeps it deployed and does not count its +3 %
    best = land.best()
    assert best.settings[SLOP] == 95 and best.gain < 0.12
    runner, verdict = run_study(land, tmp_path / "study", 3, max_trials=30)
    records = runner.records()
    setting_it = [r for r in records if SLOP in ((r.attrs.get("settings") or {}).get("xla") or {})]
    assert len(setting_it) == 1, [(r.number, r.status) for r in setting_it]
    assert setting_it[0].attrs.get("failure_class") == "unknown-flag"
    (blame,) = [b for b in runner.planner.blames(records) if b.param == SLOP]
    assert blame.every and "every value is left out" in blame.sentence()
    assert verdict is not None and SLOP not in str((verdict.winner or {}).get("settings"))


def test_the_engineers_protocol_drops_the_flag_after_its_first_abort_too(tmp_path):
    """The benchmark's ``manual`` strategy is the engineer, who reads "Unknown flag" once and moves on: it spent one
    launch on each of the range's values before (41 of its 70 launches on a 80..120 range)."""
    from benchmarks._baselines import manual_protocol

    choice = manual_protocol(_landscape(tmp_path / "landscape"), 3)
    assert [r.fault for r in choice.detail["log"] if SLOP in r.settings] == ["unknown_flag"]
