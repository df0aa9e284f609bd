"""A catalog profile is a starting point (issue 25: "treat the catalog profiles (recipes) as strong starting
points"): a recipe that ran out of memory runs again without the setting that fails alone, and a recipe runs once
with the params that measured well alone, whatever an additive model predicts for it."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from flagopt.decide import Planner, RunRecord, arms_of, config_of_settings, settings_of_record
from flagopt.decide._profiles import PROFILE_ADD_ONE, PROFILE_DROP, PROFILE_REST, better_values, profile_add_one
from flagopt.space import load_space
from tests.decisions.records import run, space_of

SPACE = """
    name: r
    command: [python, -c, pass]
    params:
      a: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      c: {env: NCCL_PROTO, choices: [Simple, LL]}
    profiles:
      recipe: {xla: {xla_gpu_enable_triton_gemm: false, xla_gpu_enable_pipelined_all_gather: true}}
      ll: {env: {NCCL_PROTO: LL}}
"""
OWN = "xla:xla_gpu_enable_triton_gemm"


def load(tmp_path):
    return space_of(tmp_path, SPACE, "r.yaml")


def load_ll_with_own_setting(tmp_path):
    """The space with its profile "ll" setting a flag of its own too: a recipe that sets a param (NCCL_PROTO)."""
    path = tmp_path / "ll.yaml"
    path.write_text(textwrap.dedent(SPACE).replace(
        "ll: {env: {NCCL_PROTO: LL}}", "ll: {env: {NCCL_PROTO: LL}, xla: {xla_gpu_enable_triton_gemm: false}}"))
    return load_space(path)


def profile_run(space, number, name, value=None, *, status="ok", failure=None, details=None):
    config = next(p for p in space.profiles if p.profile == name)
    attrs = {"settings": config.settings(), "design": "profile", "started_at": float(number)}
    if failure:
        attrs["failure_class"] = failure
        attrs["failure_details"] = details or {}
    return RunRecord(number, "profile", name, config.config_key, status, value, float(number), None, attrs=attrs)


def next_step(space, records):
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    return planner.next_screen(records, arms_of(records, space.noise), [], None)


def test_a_recipe_that_ran_out_of_memory_runs_without_the_setting_that_does_alone(tmp_path):
    space = load(tmp_path)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", status="infeasible", failure="oom"),
               profile_run(space, 2, "ll", 101.0), run(space, 3, {"a": True}, status="infeasible", failure="oom"),
               run(space, 4, {}, 100.1), run(space, 5, {"c": "Simple"}, 101.0), run(space, 6, {"c": "LL"}, 100.3),
               run(space, 7, {}, 99.9)]
    config, reason, kind = next_step(space, records)
    assert kind == PROFILE_REST and "settings that fail" in reason
    assert settings_of_record(space, config.settings()) == {OWN: False}
    assert config.profile == "recipe without a"

    records.append(run(space, 8, {OWN: False}, 100.5, design=PROFILE_REST))
    step = next_step(space, records)
    assert step is None or step[2] != PROFILE_REST  # once


def test_a_recipe_that_measured_low_runs_once_with_what_measured_well_alone(tmp_path):
    space = load(tmp_path)
    # the recipe measured below the deployed job: an additive model predicts it no good with anything
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 98.8), profile_run(space, 2, "ll", 101.5),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 101.0), run(space, 5, {"c": "Simple"}, 102.0),
               run(space, 6, {"c": "LL"}, 100.2), run(space, 7, {}, 99.9),
               run(space, 8, {"a": True, "c": "Simple"}, 103.0, design="combination")]
    config, _, kind = next_step(space, records)
    assert kind == PROFILE_ADD_ONE
    settings = settings_of_record(space, config.settings())
    assert settings == {OWN: False, "a": True, "c": "Simple"} and config.profile == "recipe + c=Simple"

    records.append(run(space, 9, settings, 108.0, design=PROFILE_ADD_ONE))
    step = next_step(space, records)
    assert step is None or step[2] != PROFILE_ADD_ONE  # once per profile; its own run is no new starting point


def test_a_profile_of_params_only_is_no_starting_point(tmp_path):
    space = load(tmp_path)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", status="infeasible", failure="oom"),
               profile_run(space, 2, "ll", 101.5), run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 101.0),
               run(space, 5, {"c": "Simple"}, 102.0), run(space, 6, {"c": "LL"}, 101.2), run(space, 7, {}, 99.9),
               run(space, 8, {"a": True, "c": "Simple"}, 103.0, design="combination")]
    step = next_step(space, records)
    assert step is not None and step[2] != "probe"  # the screen's probes are done: this asks the designs after them
    # the recipe failed and no setting of it failed alone; "ll" sets a param only, which the combination covers
    # (ll + a would be a run the screen's own designs decide about)
    assert step is None or step[2] not in (PROFILE_ADD_ONE, PROFILE_REST)


def asked(*configs):
    """What the engine passes as the add-ones asked before: each run's label and settings."""
    return [(c.profile, c.settings()) for c in configs]


def test_a_profile_runs_with_the_model_s_additions_once_whatever_the_next_fit_adds(tmp_path):
    space = load(tmp_path)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 98.8), profile_run(space, 2, "ll", 101.5),
               run(space, 3, {}, 100.1), run(space, 4, {"c": "Simple"}, 102.0), run(space, 5, {}, 99.9)]
    arms = arms_of(records, space.noise)

    def fresh(settings, label):
        return config_of_settings(space, settings, kind="probe", profile=label)

    first = profile_add_one(space, arms, lambda base: {"c": "Simple"}, lambda base: {}, fresh, [])
    assert first is not None and first.profile == "recipe + c=Simple"
    # a later fit adds something else: the recipe's question was asked
    assert profile_add_one(space, arms, lambda base: {"c": "LL"}, lambda base: {}, fresh, asked(first)) is None


def test_two_profiles_a_study_start_an_add_one(tmp_path):
    path = tmp_path / "three.yaml"  # a third profile with a setting of its own
    path.write_text(textwrap.dedent(SPACE).replace(
        "ll: {env: {NCCL_PROTO: LL}}", "ll: {env: {NCCL_PROTO: LL}, xla: {xla_gpu_enable_triton_gemm: false}}\n"
        "  simple: {env: {NCCL_PROTO: Simple}, xla: {xla_gpu_enable_triton_gemm: false}}"))
    space = load_space(path)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 101.0), profile_run(space, 2, "ll", 101.5),
               profile_run(space, 3, "simple", 100.5), run(space, 4, {}, 100.1)]
    arms = arms_of(records, space.noise)

    def fresh(settings, label):
        return config_of_settings(space, settings, kind="probe", profile=label)

    def add(base):
        return {"c": "Simple"} if "a" in base else {"a": True}

    first = profile_add_one(space, arms, add, lambda base: {}, fresh, [])
    second = profile_add_one(space, arms, add, lambda base: {}, fresh, asked(first))
    assert (first.profile, second.profile) == ("ll + a=true", "recipe + c=Simple")  # the best measured first
    # each is one more run of the budget: the third profile gets none
    assert profile_add_one(space, arms, add, lambda base: {}, fresh, asked(first, second)) is None


def test_a_profile_add_one_that_moved_a_value_runs_once_more_with_the_profile_s_own_value(tmp_path):
    space = load_ll_with_own_setting(tmp_path)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 98.8), profile_run(space, 2, "ll", 101.5),
               run(space, 3, {}, 100.1)]
    arms = arms_of(records, space.noise)

    def fresh(settings, label):
        return config_of_settings(space, settings, kind="probe", profile=label)

    fits = iter([{"a": True}, {}, {}])  # the model's additions: the next fits add nothing more to ll

    def add(base):
        return {"c": "Simple"} if "a" in base else next(fits)

    def to_simple(base):
        return {"c": "Simple"} if base.get("c") == "LL" else {}

    first = profile_add_one(space, arms, add, to_simple, fresh, [])
    assert first.profile == "ll + a=true, c=Simple for LL"
    assert settings_of_record(space, first.settings()) == {OWN: False, "a": True, "c": "Simple"}
    # LL may pay only with the recipe's own triton setting: the same additions with the profile's value kept
    # (the first run's additions, read from its settings: the next fit adding nothing does not change the question)
    twin = profile_add_one(space, arms, add, to_simple, fresh, asked(first))
    assert twin.profile == "ll + a=true, its own values kept"
    assert settings_of_record(space, twin.settings()) == {OWN: False, "a": True, "c": "LL"}
    # both ways once; the twin is no start of its own, so the second profile still gets its turn
    after = profile_add_one(space, arms, add, to_simple, fresh, asked(first, twin))
    assert after is not None and after.profile.startswith("recipe + ")
    # an add-one that moved nothing has no twin, whatever its label says
    same = fresh({OWN: False, "a": True, "c": "LL"}, "ll + a=true, c=Simple for LL")
    unmoved = profile_add_one(space, arms, add, lambda base: {}, fresh, asked(same))
    assert unmoved is not None and unmoved.profile.startswith("recipe + ")


def test_a_recipe_value_the_runs_show_clearly_worse_moves_to_the_better_one(tmp_path):
    space = load_ll_with_own_setting(tmp_path)
    # the recipe "ll" sets NCCL_PROTO=LL, which measured at the deployed job's level three times; Simple +3 %
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 100.2), profile_run(space, 2, "ll", 100.1),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 99.0), run(space, 5, {"c": "Simple"}, 103.0),
               run(space, 6, {"c": "LL"}, 100.0), run(space, 7, {}, 99.9), run(space, 8, {"c": "Simple"}, 103.1),
               run(space, 9, {"c": "LL"}, 99.9), run(space, 10, {}, 100.0)]
    planner = Planner(space)
    planner._sigma = 0.005
    model = planner.model(records)
    base = {OWN: False, "c": "LL"}
    assert better_values(model, base, planner.deployed, []) == {"c": "Simple"}
    # a boolean has no other value to move to: dropping it is a drop-one's question
    assert better_values(model, {OWN: False, "a": True}, planner.deployed, []) == {}


def test_a_recipe_for_another_jaxlib_runs_at_once_without_the_flag_the_installed_one_rejects(tmp_path):
    space = load(tmp_path)
    # pre-flight found triton_gemm unknown: the recipe never ran, and its failure names the flag
    rejected = {"flag_names": ["xla_gpu_enable_triton_gemm"], "env_var": "XLA_FLAGS"}
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", status="invalid", failure="unknown-flag",
                                                      details=rejected), profile_run(space, 2, "ll", 101.0)]
    config, _, kind = next_step(space, records)
    assert kind == PROFILE_REST and config.profile == f"recipe without {OWN}"  # before any probe
    assert settings_of_record(space, config.settings()) == {"a": True}

    records[1] = profile_run(space, 1, "recipe", status="failed", failure="crash", details=rejected)
    config, _, kind = next_step(space, records)
    assert kind == "probe"  # a crash names no flag: nothing to drop, the probes go on


def test_a_winners_companions_take_a_recipes_own_settings_and_the_balanced_screen_does_not(tmp_path):
    from flagopt.decide._balanced import BALANCED, COMPANIONS
    space = load(tmp_path)
    # the recipe measured well; NCCL_PROTO=Simple is the winner, and it lacks the recipe's triton_gemm=false
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 102.0), profile_run(space, 2, "ll", 100.1),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 100.9), run(space, 5, {"c": "Simple"}, 106.0),
               run(space, 6, {}, 99.9)]
    planner = Planner(space)
    planner._sigma = 0.005
    model = planner.model(records)
    assert OWN in model.values and model.best_values()[OWN][0] is False
    winner = {"c": "Simple"}
    rows = planner.design_rows(model, winner, [], records, label=COMPANIONS)
    assert {name for extra, _ in rows for name in extra} == {"a", OWN}
    assert all(name != OWN for extra, _ in planner.design_rows(model, {}, [], records, label=BALANCED)
               for name in extra)
    # the add-one around a winner may take it too; the combination, built from params, does not
    assert OWN in planner.additions(model, winner, [], own=True)
    assert OWN not in planner.combination(model, [])


def test_a_recipe_with_a_setting_that_costs_much_alone_runs_without_it_once(tmp_path):
    space = load(tmp_path)
    # the recipe sets the pipelined all-gather, which measured 20 % slower alone on this job
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 81.0), profile_run(space, 2, "ll", 100.2),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 80.0), run(space, 5, {}, 99.9)]
    config, reason, kind = next_step(space, records)
    assert kind == PROFILE_REST and "cost most alone" in reason
    assert settings_of_record(space, config.settings()) == {OWN: False}
    assert config.profile == "recipe without a"

    records.append(run(space, 6, {OWN: False}, 101.0, design=PROFILE_REST))
    step = next_step(space, records)
    assert step is None or step[2] != PROFILE_REST  # once


def test_a_recipe_setting_that_costs_little_alone_stays_in_it(tmp_path):
    space = load(tmp_path)
    # -1 % alone is no clear cost: a setting may pay only in the recipe's company (triton_gemm=false on 2xH200)
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 99.0), profile_run(space, 2, "ll", 100.2),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 99.0), run(space, 5, {}, 99.9)]
    step = next_step(space, records)
    assert step is None or step[2] != PROFILE_REST


def with_three_settings(tmp_path):
    """The space with a recipe of three settings: its own triton_gemm=false, the all-gather and NCCL_PROTO=LL."""
    path = tmp_path / "three.yaml"
    path.write_text(textwrap.dedent(SPACE).replace(
        "recipe: {xla: {xla_gpu_enable_triton_gemm: false, xla_gpu_enable_pipelined_all_gather: true}}",
        "recipe: {xla: {xla_gpu_enable_triton_gemm: false, xla_gpu_enable_pipelined_all_gather: true}, "
        "env: {NCCL_PROTO: LL}}"))
    return load_space(path)


def test_a_recipe_far_below_the_deployed_job_runs_without_each_of_its_settings_once(tmp_path):
    space = with_three_settings(tmp_path)
    # the recipe measured 30 % slower, while its params each measured fine alone: two of its settings conflict
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 70.0), profile_run(space, 2, "ll", 101.5),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 102.0), run(space, 5, {"c": "Simple"}, 100.5),
               run(space, 6, {}, 99.9)]
    recipe = {OWN: False, "a": True, "c": "LL"}
    for number, dropped in enumerate(sorted(recipe), start=7):
        config, reason, kind = next_step(space, records)
        assert kind == PROFILE_DROP and "far below" in reason
        assert config.profile == f"recipe without {dropped}"
        rest = {n: v for n, v in recipe.items() if n != dropped}
        assert settings_of_record(space, config.settings()) == rest
        records.append(replace(run(space, number, rest, 71.0 if dropped != "a" else 108.0, design=PROFILE_DROP),
                               profile=config.profile))
    step = next_step(space, records)
    assert step is None or step[2] != PROFILE_DROP  # each setting once


def test_a_recipe_whose_cost_one_setting_explains_runs_only_without_that_one(tmp_path):
    space = with_three_settings(tmp_path)
    # -19 %: far below, but the pipelined all-gather cost 20 % alone, and the recipe ran without it
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 81.0), profile_run(space, 2, "ll", 100.2),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 80.0), run(space, 5, {}, 99.9),
               run(space, 6, {"c": "Simple"}, 100.5),
               replace(run(space, 7, {OWN: False, "c": "LL"}, 101.0, design=PROFILE_REST), profile="recipe without a")]
    step = next_step(space, records)
    assert step is None or step[2] not in (PROFILE_REST, PROFILE_DROP)
    # a recipe a few points low is within a drifting job's reach: no drop-ones either
    records = [run(space, 0, {}, 100.0), profile_run(space, 1, "recipe", 97.0), profile_run(space, 2, "ll", 100.2),
               run(space, 3, {}, 100.1), run(space, 4, {"a": True}, 101.0), run(space, 5, {"c": "Simple"}, 100.5),
               run(space, 6, {}, 99.9)]
    step = next_step(space, records)
    assert step is None or step[2] != PROFILE_DROP
