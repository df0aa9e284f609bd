"""Sampling through ``flagopt run``: ``seed:`` reproducibility, ``--sampler random``, ``--trials N`` and resume."""

from __future__ import annotations

from flagopt.cli import main
from flagopt.study import history, load_study

SPACE = """
    name: {name}
    command: ["{{python}}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]
    seed: 7
    baseline: {{env: {{FLAGOPT_DEPLOYED: "1"}}}}  # something deployed, so wave 1 is both baselines
    params:
      tps: {{arg: tokens_per_s, type: int, low: 49900, high: 50100}}
    stop: {{max_trials: 40, max_null: 100}}
    screen: false  # the sampler from the first run on
    noise: {{baseline_every: 100}}
"""


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def sampled(storage, name):
    return [r.params["tps"] for r in history(load_study(storage, name)) if r.kind == "sampled"]


def test_seeded_random_sampler_is_reproducible_and_resume_proposes_new_points(write_space, storage):
    a = write_space(SPACE.format(name="a"), "a.yaml")
    b = write_space(SPACE.format(name="b"), "b.yaml")
    assert run(a, storage, "--sampler", "random", "--trials", "4") == 0
    assert run(b, storage, "--sampler", "random", "--trials", "4") == 0
    first = sampled(storage, "a")
    assert len(first) == 2  # --trials 4: two baselines, then two sampled runs
    assert sampled(storage, "b") == first  # same seed, same proposals
    assert run(a, storage, "--sampler", "random", "--trials", "3") == 0
    resumed = sampled(storage, "a")
    assert len(resumed) == 5 and resumed[:2] == first  
    assert not set(resumed[2:]) & set(first)  # the resumed sampler does not replay the first invocation
    assert len(history(load_study(storage, "a"))) == 7  # --trials counts this invocation's launches only


SMALL = """
    name: small
    command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]
    seed: 7
    params:
      tps: {arg: tokens_per_s, choices: [49950, 50000, 50050]}
    stop: {max_trials: 20, max_null: 100}
    screen: false  # the sampler from the first run on
    noise: {baseline_every: 100}
"""


def test_a_sampled_point_measured_already_is_not_run_again(write_space, storage):
    # Three configurations: a uniform sampler repeats one within three draws more often than not (7 in 9); the
    # race decides repeats, so each sampled run measures a configuration not measured before.
    space = write_space(SMALL, "small.yaml")
    assert run(space, storage, "--sampler", "random", "--trials", "4") == 0
    records = history(load_study(storage, "small"))
    ran = [r.params["tps"] for r in records if r.kind == "sampled" and r.status != "invalid"]
    assert sorted(ran) == [49950, 50000, 50050]
    skipped = [r for r in records if r.status == "invalid"]
    assert skipped and all("measured already" in r.attrs["failure_reason"] for r in skipped)
    assert {r.params["tps"] for r in skipped} <= set(ran)
