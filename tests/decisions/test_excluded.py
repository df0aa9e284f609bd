"""A value the installed XLA rejects never reaches the sampler (issue 23 point 1: every value of a param pre-flight
rejected was still proposed by TPE 30 times, each told as an invalid trial)."""

from __future__ import annotations

import warnings

import optuna

from benchmarks._flagopt_run import clean_environment
from benchmarks._sim_executor import SimExecutor
from benchmarks._spaces import write_space
from benchmarks.rejected_flag import null_with_rejected_flag
from flagopt.render import render
from flagopt.decide import config_of_settings
from flagopt.study import Progress, StudyRunner
from flagopt.workloads.sim import load_landscape
from tests.decisions.sim_study import run_study

FLAG = "xla_gpu_enable_pipelined_all_gather"


def test_rejected_values_are_never_sampled_nor_told_as_invalid(tmp_path):
    land = load_landscape("null")
    space = write_space(land, 0, tmp_path, max_trials=24, screen=False)
    param = next(p for p in space.params if p.key == FLAG)
    rejected = {t for v in param.choices for t in render(space, config_of_settings(
        space, {param.name: v}, kind="sampled", profile="s"), inherited={}).xla_flags.split() if FLAG in t}
    assert rejected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        runner = StudyRunner(space, SimExecutor(tmp_path / "jobs", base_env=clean_environment(land)),
                             storage=f"sqlite:///{tmp_path}/s.db", progress=Progress(quiet=True), force=True,
                             poll_s=0.0, preflight_excluded=tuple(sorted(rejected)))
        runner.run()
    records = runner.records()
    sampled = [r for r in records if r.kind == "sampled"]
    assert len(sampled) >= 10
    assert not [r for r in records if r.status == "invalid"]  # nothing proposed only to be thrown away
    assert not [r for r in sampled if FLAG in (r.attrs.get("settings") or {}).get("xla", {})]


def test_a_space_whose_every_value_fails_alone_ends_without_asking_the_sampler(tmp_path):
    """Two booleans that each run out of memory alone and a flag the installed XLA does not know: no configuration
    can run. The study ends on the three probes with a verdict that names each value, instead of asking the sampler
    for points that all contain one (30 records told as not run before it gave up)."""
    booleans = ("xla_gpu_enable_pipelined_all_gather", "xla_gpu_enable_while_loop_double_buffering")
    land = null_with_rejected_flag(tmp_path / "landscape", kept=booleans, oom=booleans)
    runner, verdict = run_study(land, tmp_path / "study", 1)
    records = runner.records()
    assert verdict.reason == "budget" and not verdict.winner
    assert verdict.message.startswith("no configuration of the space can run: ")
    assert verdict.message.count("failed: oom") == 2 and "rejects xla_gpu_enable_async_collectives=true" in verdict.message
    assert [r.kind for r in records if not r.is_baseline] == ["probe"] * 3
