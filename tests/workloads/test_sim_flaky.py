"""Flaky infrastructure in the simulated job: the real classifier must see exactly what real failures look like.

Each kind is found by its launch index (deterministic in seed and launch), then run both in-process
(``SimExecutor``, as a benchmark study does) and as a real process under the real trial runner and its watchdogs.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from benchmarks._sim_executor import SimExecutor
from flagopt.executors import TrialLaunch, run_trial
from flagopt.failures import classify
from flagopt.workloads.sim import FLAKY_KINDS, LANDSCAPES_ENV, load_landscape

SIM = (sys.executable, "-m", "flagopt.workloads.sim")
STEPS = 15
STEP_LINE = re.compile(r"^completed step: \d+", re.MULTILINE)
EXPECTED = {"nccl_init": "nccl-init", "coordination_timeout": "coordination-timeout", "hang": "hang",
            "sigterm_after": "benign-exit"}
REPO = Path(__file__).resolve().parents[2]


def first_launch(kind: str, seed: int = 0) -> int:
    land = load_landscape("flaky")
    return next(i for i in range(2000) if land.infra_fault(seed, i) == kind)


def classified(outcome_log: str, exit_code: int | None, killed_by: str | None):
    seen = len(STEP_LINE.findall(outcome_log))
    return classify(outcome_log, exit_code=exit_code, killed_by=killed_by, window_complete=seen >= STEPS,
                    steps_seen=seen)


def test_fault_draws_are_deterministic_and_near_the_declared_rates() -> None:
    land = load_landscape("flaky")
    draws = [land.infra_fault(1, i) for i in range(4000)]
    assert draws == [land.infra_fault(1, i) for i in range(4000)]
    for kind in FLAKY_KINDS:
        assert draws.count(kind) / len(draws) == pytest.approx(land.flaky[kind], abs=0.012)
    assert load_landscape("win10").infra_fault(1, 0) is None  # no flaky section: no draw, noise unchanged


@pytest.mark.parametrize("kind", FLAKY_KINDS)
def test_sim_executor_failures_classify_as_the_real_ones(kind: str, tmp_path: Path) -> None:
    launch_index = first_launch(kind)
    executor = SimExecutor(tmp_path / "jobs", base_env={})
    job = executor.submit(TrialLaunch((*SIM, "landscape=flaky", "seed=0", f"launch={launch_index}"), {},
                                      str(tmp_path), str(tmp_path / "t"), hang_s=600.0))
    outcome = job.result().rank0
    log = Path(outcome.log_path).read_text()
    failure = classified(log, outcome.exit_code, outcome.killed_by)
    assert failure is not None and failure.failure_class == EXPECTED[kind]
    assert executor.faults == [kind]
    if kind == "hang":
        assert outcome.killed_by == "hang" and outcome.exit_code == -15
        assert executor.run_seconds[0] > 600.0  # the watchdog's wait is spent
    if kind == "sigterm_after":
        assert outcome.exit_code == -15 and len(STEP_LINE.findall(log)) == STEPS


@pytest.mark.parametrize("kind", FLAKY_KINDS)
def test_the_real_process_fails_alike_under_the_trial_runner(kind: str, tmp_path: Path) -> None:
    launch_index = first_launch(kind)
    clean = {k: None for k in ("XLA_FLAGS", "FLAGOPT_SIM_STATE", LANDSCAPES_ENV) if k in os.environ}
    outcome = run_trial(TrialLaunch((*SIM, "landscape=flaky", "seed=0", f"launch={launch_index}", "step_s=0.01"),
                                    clean, str(REPO), str(tmp_path / kind), timeout_s=60, hang_s=1.0))
    log = Path(outcome.log_path).read_text()
    failure = classified(log, outcome.exit_code, outcome.killed_by)
    assert failure is not None and failure.failure_class == EXPECTED[kind], log
    fake = SimExecutor(tmp_path / "jobs", base_env={}).submit(TrialLaunch(
        (*SIM, "landscape=flaky", "seed=0", f"launch={launch_index}"), {}, str(tmp_path), str(tmp_path / "t"),
        hang_s=1.0)).result().rank0
    assert (outcome.exit_code, outcome.killed_by) == (fake.exit_code, fake.killed_by)
    assert STEP_LINE.findall(log) == STEP_LINE.findall(Path(fake.log_path).read_text())


def test_a_study_records_each_launch_s_fault_with_its_class(tmp_path: Path) -> None:
    from benchmarks._flagopt_run import run_flagopt

    land = load_landscape("flaky")
    # Seed 3 draws sigterm_after at launch 10 and coordination_timeout at launch 19
    # (test_fault_draws_are_deterministic_and_near_the_declared_rates pins the draws): 24 launches hold a benign exit
    # and a failure the study must blame on the infrastructure.
    choice = run_flagopt(land, 3, tmp_path / "study", max_trials=24)
    faults = choice.detail["faults"]
    assert any(f in ("nccl_init", "coordination_timeout", "hang") for f in faults), faults
    failed = [r for r in choice.detail["log"] if not r.ok]
    assert sorted(r.fault for r in failed) == sorted(EXPECTED[f] for f in faults
                                                      if f not in (None, "sigterm_after"))
    assert choice.detail["run_seconds"] > 600.0 * faults.count("hang")
