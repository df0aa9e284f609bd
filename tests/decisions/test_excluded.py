"""A value the installed XLA rejects never reaches the sampler (issue 23 point 1: every value of a param pre-flight
rejected was still proposed by TPE 30 times, each told as an invalid trial)."""

from __future__ import annotations

import warnings

import optuna

from benchmarks._flagopt_run import clean_environment
from benchmarks._sim_executor import SimExecutor
from benchmarks._spaces import write_space
from flagopt.render import render
from flagopt.decide import config_of_settings
from flagopt.study import Progress, StudyRunner
from flagopt.workloads.sim import load_landscape

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
