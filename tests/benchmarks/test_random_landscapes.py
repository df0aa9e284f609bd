"""Held-out random landscapes: deterministic per seed, true to their family, and run like shipped ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks._random_landscapes import (CHOICES, FAMILIES, random_landscape, random_landscape_data,
                                          write_landscapes)
from benchmarks._sim_executor import SimExecutor
from benchmarks._spaces import space_data
from flagopt.executors import TrialLaunch
from flagopt.logs import parse_steps
from flagopt.workloads.sim import load_landscape

SEEDS = range(12)


def test_the_same_seed_gives_the_same_landscape_and_another_seed_another() -> None:
    for family in FAMILIES:
        assert random_landscape_data(family, 5) == random_landscape_data(family, 5)
        assert random_landscape_data(family, 5) != random_landscape_data(family, 6)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_landscape_meets_its_family_definition(family: str, tmp_path: Path) -> None:
    kinds: set[str] = set()
    for seed in SEEDS:
        land = random_landscape(family, seed, tmp_path)
        assert 4 <= len(land.params) <= 8 and 0.003 <= land.noise["run"] <= 0.01
        assert 0.01 <= land.drift_model["total"] <= 0.04 and land.drift_model["launches"] == 80
        kinds.update(p.type for p in land.params.values())
        assert land.oom_bytes({}) is None, f"{family}-{seed}: the deployed job itself runs out of memory"
        best = land.best()
        assert land.oom_bytes(best.settings, on_baseline=False) is None
        if family == "rand-win":
            assert best.gain >= 0.06
        elif family == "rand-below":
            assert 0.025 <= best.gain <= 0.045
        else:
            for name, param in land.params.items():
                for value in param.grid():
                    if land.oom_bytes({name: value}) is None:
                        assert abs(land.true_gain({name: value})) < 0.003
            assert all(abs(i["gain"]) < 0.003 for i in land.interactions)
    assert {"int", "bool", "categorical"} <= kinds  # mixed types across the family


@pytest.mark.parametrize(("family", "seed"), [("rand-win", 12011), ("rand-win", 19013), ("rand-recipe", 13007),
                                           ("rand-win", 0), ("rand-below", 0), ("rand-recipe", 0)])
def test_no_setting_drives_the_throughput_to_zero_or_below(family: str, seed: int, tmp_path: Path) -> None:
    # Scaled to reach their family's best, these three seeds once had settings worth -112 % and -629 % alone whose
    # product was a +15.6 % "best" that each half broke alone: a truth no job has, and a miss no engine could avoid.
    land = random_landscape(family, seed, tmp_path)
    assert land.lowest_factor() > 0
    best = land.best()
    assert all(param.factor(best.settings.get(name, param.default)) > 0 for name, param in land.params.items())


def test_the_families_carry_the_structures_they_promise(tmp_path: Path) -> None:
    lands = [random_landscape(f, s, tmp_path) for f in ("rand-win", "rand-below") for s in range(30)]
    assert any(land.interactions for land in lands) and any(not land.interactions for land in lands)
    assert any(i["gain"] < 0 for land in lands for i in land.interactions)  # a sign flip
    assert any(land.ooms for land in lands)
    assert any("bubble" in (p.effect or {}) for land in lands for p in land.params.values())


def test_a_held_out_landscape_runs_through_the_space_command_like_a_shipped_one(tmp_path: Path) -> None:
    path = tmp_path / "held.yaml"
    name = write_landscapes(path, [("rand-win", 2)])[0]
    land = random_landscape("rand-win", 2, tmp_path / "again")
    command = space_data(land, 0)["command"]
    assert f"landscape={name}" in command and any(c.startswith("landscapes=") for c in command)
    argv = tuple("python" if c == "{python}" else c for c in command)
    executor = SimExecutor(tmp_path / "jobs", base_env={})
    outcome = executor.submit(TrialLaunch(argv, {}, str(tmp_path), str(tmp_path / "t"))).result().rank0
    steps = parse_steps(Path(outcome.log_path).read_text())
    assert outcome.exit_code == 0 and len(steps) == 15
    expected = land.sample_run({}, 0, np.random.default_rng([0, 0]))
    assert [s.value for s in steps] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_flaky_family_is_the_same_landscape_on_flaky_infrastructure(family: str, tmp_path: Path) -> None:
    for seed in range(3):
        plain = random_landscape_data(family, seed)
        flaky = random_landscape_data(family + "-flaky", seed)
        assert {k: v for k, v in flaky.items() if k != "flaky"} == {**plain, "description": flaky["description"]}
        assert flaky["description"].startswith(plain["description"]) and "flaky" not in plain
        land = random_landscape(family + "-flaky", seed, tmp_path / str(seed))
        assert land.name == f"{family}-flaky-{seed}" and dict(land.flaky) == dict(load_landscape("flaky").flaky)
        assert land.best() == random_landscape(family, seed, tmp_path / f"plain{seed}").best()
    # about one launch in eight meets a fault no setting causes (12 %, the shipped flaky landscape's rates: 8 % fail,
    # 4 % exit 143 after every step printed, measured)
    faults = [land.infra_fault(0, launch) for launch in range(400)]
    assert 0.07 < sum(f is not None for f in faults) / 400 < 0.18
    assert random_landscape(family, 0, tmp_path / "plain").infra_fault(0, 3) is None


def test_an_unknown_family_names_the_families_there_are() -> None:
    with pytest.raises(ValueError, match="rand-win-flaky") as err:
        random_landscape_data("rand-winn", 0)
    assert all(name in str(err.value) for name in CHOICES)


def test_the_recipe_family_adds_a_recipe_a_pool_and_settings_only_a_profile_sets(tmp_path: Path) -> None:
    own_in_best = 0
    for seed in range(12):
        land = random_landscape("rand-recipe", seed, tmp_path / str(seed))
        base = random_landscape_data("rand-win", seed)  # the same draw, less the recipe structure
        assert land.best().gain >= 0.06 and land.pool and land.pool["hides"]
        own = {n for n, p in land.params.items() if not p.tunable}
        assert 1 <= len(own) <= 3 and not own & set(base["params"])
        assert not own & set(land.space_params())  # the search space does not offer them
        recipe = {k for part in land.profiles["recipe"].values() for k in part}
        assert own <= recipe  # only the recipe sets them
        assert all(any(n in i["when"] for i in land.interactions) for n in own)  # each pays with a partner
        assert len(land.profiles) >= 2
        best = land.best().settings
        own_in_best += any(best[n] != land.params[n].default for n in own)
    assert own_in_best >= 4  # the best often needs what only the recipe sets
