"""The best measured recipe runs once with another catalog profile's settings (issue 25: a catalog's profiles are
written to be stacked; rand-recipe-1007: the recipe with another profile's NCCL protocol is the best)."""

from __future__ import annotations

from flagopt.decide import arms_of, config_of_settings, settings_of_record
from flagopt.decide import _profiles
from flagopt.decide._profiles import MAX_PROFILE_UNIONS, PROFILE_ADD_ONE, PROFILE_UNION, profile_union
from flagopt.decide._runs import RunRecord
from tests.decisions.records import run, space_of
from tests.decisions.test_profiles import next_step, profile_run

SPACE = """
    name: u
    command: [python, -c, pass]
    params:
      a: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      c: {env: NCCL_PROTO, choices: [Simple, LL, LL128]}
    profiles:
      recipe: {xla: {xla_gpu_enable_triton_gemm: false, xla_gpu_enable_pipelined_all_gather: true},
               env: {NCCL_PROTO: LL128}}
      ll: {env: {NCCL_PROTO: LL}}
      simple: {env: {NCCL_PROTO: Simple}}
      gather: {xla: {xla_gpu_enable_pipelined_all_gather: true}}
"""
OWN = "xla:xla_gpu_enable_triton_gemm"


def load(tmp_path, text=SPACE):
    return space_of(tmp_path, text, "u.yaml")


def unions(space, records, count, asked=None):
    """The first ``count`` unions the engine would ask, each recorded as asked (and tried) before the next;
    ``asked``: the unions asked before (labels and settings), extended in place."""
    arms = arms_of(records, space.noise)
    asked = [] if asked is None else asked
    tried = {config_of_settings(space, settings_of_record(space, s), kind="probe", profile=label).config_key
             for label, s in asked}

    def fresh(settings, label):
        config = config_of_settings(space, settings, kind="probe", profile=label)
        return None if config.config_key in tried else config

    out = []
    for _ in range(count):
        config = profile_union(space, arms, fresh, asked)
        out.append(config)
        if config is not None:
            tried.add(config.config_key)
            asked.append((config.profile, config.settings()))
    return out


def measured(space):
    return [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 100.4), profile_run(space, 2, "ll", 101.2),
            profile_run(space, 3, "simple", 100.2), profile_run(space, 4, "gather", 99.8), run(space, 5, {}, 100.1)]


def test_the_other_profile_s_value_stands_where_the_two_conflict(tmp_path):
    space = load(tmp_path)
    first, = unions(space, measured(space), 1)
    assert first.profile == "recipe + ll"  # the best measured other profile first
    # the recipe's LL128 swapped for the other profile's LL; the recipe's own setting kept
    assert settings_of_record(space, first.settings()) == {OWN: False, "a": True, "c": "LL"}


def test_none_that_adds_nothing(tmp_path):
    space = load(tmp_path)
    configs = unions(space, measured(space), MAX_PROFILE_UNIONS + 1)
    # "gather" sets only what the recipe sets: no union of it, whatever the budget
    assert [c.profile if c else None for c in configs] == ["recipe + ll", "recipe + simple", None]


def test_at_most_two_unions_a_study(tmp_path, monkeypatch):
    # a fourth profile that would add a setting of its own, measured lowest: only the cap keeps it out
    space = load(tmp_path, SPACE + "      cudnn: {xla: {xla_gpu_enable_cudnn_fmha: true}}\n")
    records = measured(space) + [profile_run(space, 6, "cudnn", 99.5)]
    assert [c.profile if c else None for c in unions(space, records, 3)] == ["recipe + ll", "recipe + simple", None]
    monkeypatch.setattr(_profiles, "MAX_PROFILE_UNIONS", 3)
    assert [c.profile for c in unions(space, records, 3)] == ["recipe + ll", "recipe + simple", "recipe + cudnn"]


def test_no_union_without_a_measured_profile_of_settings_of_its_own(tmp_path):
    space = load(tmp_path)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", status="infeasible", failure="oom"),
               profile_run(space, 2, "ll", 101.2), profile_run(space, 3, "simple", 100.2), run(space, 4, {}, 100.1)]
    assert unions(space, records, 1) == [None]


def test_the_engine_asks_a_union_no_run_has_asked_after_the_profile_add_one(tmp_path):
    space = load(tmp_path)
    records = measured(space) + [run(space, 6, {"a": True}, 100.3), run(space, 7, {"c": "Simple"}, 100.1),
                                 run(space, 8, {"c": "LL"}, 101.0), run(space, 9, {"c": "LL128"}, 100.2),
                                 run(space, 10, {}, 99.9),
                                 run(space, 11, {"a": True, "c": "LL"}, 101.3, design="combination")]
    seen = []
    for number in range(12, 20):
        step = next_step(space, records)
        if step is None:
            break
        config, _, kind = step
        seen.append((kind, config.profile))
        settings = settings_of_record(space, config.settings())
        records.append(run(space, number, settings, 101.0, design=kind))
    # the add-one moved the recipe's protocol to LL, the best alone: that is the recipe with "ll", which runs once
    assert seen[0] == ("profile-add-one", "recipe + c=LL for LL128")
    assert seen[1:] == [(PROFILE_UNION, "recipe + simple")]


def test_a_recipe_s_add_one_that_measures_best_is_stacked_with_the_other_profiles(tmp_path):
    """rand-recipe-60009: the recipe's add-one led the study; the profile that paid only beside it (-12 % alone,
    +13 % together) had been stacked on the recipe alone."""
    space = load(tmp_path, SPACE + "      cudnn: {xla: {xla_gpu_enable_cudnn_fmha: true}}\n")
    records = measured(space) + [profile_run(space, 6, "cudnn", 99.5)]
    grown = config_of_settings(space, {OWN: False, "a": True, "c": "LL"}, kind="probe",
                               profile="recipe + c=LL for LL128")
    add_one = RunRecord(7, "probe", grown.profile, grown.config_key, "ok", 102.0, 7.0, None,
                        attrs={"settings": grown.settings(), "design": PROFILE_ADD_ONE, "started_at": 7.0})
    asked: list = []
    assert None not in unions(space, records, MAX_PROFILE_UNIONS, asked)
    assert unions(space, records, 1, asked) == [None]  # the recipe's unions are spent
    seen = [(c.profile, settings_of_record(space, c.settings())) if c else None
            for c in unions(space, records + [add_one], 2, asked)]
    # on the add-one: "ll" adds nothing to it, with "simple" it is the recipe's union already run, and the recipe is
    # where it came from; "cudnn" never ran on the recipe (the cap)
    assert seen == [("recipe + c=LL for LL128 + cudnn",
                     {OWN: False, "a": True, "c": "LL", "xla:xla_gpu_enable_cudnn_fmha": True}), None]
