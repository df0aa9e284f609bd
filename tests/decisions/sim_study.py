"""A whole study of the real driver on a simulated landscape (SimExecutor), for the decision tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna

from benchmarks._flagopt_run import clean_environment
from benchmarks._sim_executor import SimExecutor
from benchmarks._spaces import write_space
from flagopt.study import Progress, StudyRunner, Verdict
from flagopt.workloads.sim import Landscape

#: The stress landscapes of the benchmark (shapes the shipped landscapes lack), for studies of one of them.
STRESS = Path(__file__).resolve().parents[2] / "benchmarks" / "stress_landscapes.yaml"


def run_study(land: Landscape, tmp_path: Path, seed: int, *, max_trials: int | None = 60, slots: int = 1,
              **options) -> tuple[StudyRunner, Verdict | None]:
    """Run the study of ``land`` (``options`` merged into its space file) to its verdict, on ``slots`` identical
    slots (``max_trials`` ``None``: the budget grows with the slots)."""
    space = write_space(land, seed, tmp_path, max_trials=max_trials, **options)
    names = [f"slot{i}" for i in range(slots)] if slots > 1 else [""]
    executor = SimExecutor(tmp_path / "jobs", base_env=clean_environment(land), slots=names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        runner = StudyRunner(space, executor, storage=f"sqlite:///{tmp_path}/s.db", progress=Progress(quiet=True),
                             force=True, poll_s=0.0)
        verdict = runner.run()
    return runner, verdict
