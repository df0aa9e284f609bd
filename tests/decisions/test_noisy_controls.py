"""A verdict without a winner says when the job's runs are too noisy to tell a winner from noise.

The CPU demo (search_spaces/demo.yaml) on a 2-core machine whose other work came and went: its controls read 5-17 % a
run apart against a 5 % win bar (1.8 % on the idle machine), and the budget verdict told the user to raise
``stop.max_trials`` and run again, on the same busy machine. Such a study now says how far its runs vary and that an
idle machine, not a larger budget, is the remedy. The noise is the larger of the controls' and the fit of every run's:
a few controls can agree by chance (seed 3's three read within 0.1 %). A simulated job (below5, whose best is +4 %)
with 6 % run noise stands in for the busy machine; below5 itself (0.5 %) gets no such sentence.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from flagopt.workloads.sim import LANDSCAPES, landscape_from_data, load_landscape
from tests.decisions.sim_study import run_study


def _noisy(folder: Path, name: str, run_noise: float):
    """Landscape ``name`` with ``run_noise``, in a landscapes file of its own (the simulated job reads it there)."""
    data = yaml.safe_load(Path(LANDSCAPES).read_text())[name]
    data = {**data, "noise": {**data["noise"], "run": run_noise}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "landscapes.yaml"
    path.write_text(yaml.safe_dump({f"{name}-noisy": data}))
    return landscape_from_data(f"{name}-noisy", data, path)


# seed 0: the controls read 6.6 % apart; seed 3: three controls within 0.1 %, and the repeats show the noise
@pytest.mark.parametrize("seed", [0, 3])
def test_a_budget_verdict_on_runs_far_noisier_than_the_win_bar_says_so(tmp_path, seed):
    runner, verdict = run_study(_noisy(tmp_path, "below5", 0.06), tmp_path, seed, max_trials=20)
    assert verdict.reason == "budget", verdict.message
    match = re.search(r"this job's runs vary by (\d+\.\d)% run to run \((\d+) controls and the repeats\), more than "
                      r"half the 5% win bar: .* measure on idle, pinned ones", verdict.message)
    assert match, verdict.message
    assert float(match.group(1)) > 2.5 and float(match.group(1)) / 100 >= round(verdict.noise["run_sigma"], 3)
    assert int(match.group(2)) == verdict.noise["baseline_runs"] >= 3


def test_a_job_whose_runs_repeat_gets_no_such_sentence(tmp_path):
    runner, verdict = run_study(load_landscape("below5"), tmp_path, 5, max_trials=20)
    assert verdict.reason == "budget", verdict.message
    assert verdict.noise["run_sigma"] < 0.025
    assert "run to run" not in verdict.message
