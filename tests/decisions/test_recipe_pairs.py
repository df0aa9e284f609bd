"""Rows on top of a recipe set the few-level values no run set beside its own flags (issue 25: "settings that help
only inside a recipe"; rand-recipe-100001: NCCL_ALGO=Tree cost 1.9 % alone and paid 12 % beside the recipe's flags).

recipe_pair_row of flagopt/decide/_pairs.py, and the real driver on a simulated job (SimExecutor):
stress-recipe-partner of benchmarks/stress_landscapes.yaml, where Tree costs 2 % alone, the recipe's triton and
cudnn flags with it are +8.3 %, and nothing without Tree adds up to the win bar (+2.9 % at most).
"""

from __future__ import annotations


from flagopt.decide import config_of_settings, settings_of_record
from flagopt.decide._pairs import MAX_PAIR_ROWS, RECIPE_PAIRS, recipe_pair_row
from flagopt.workloads.sim import load_landscape
from tests.decisions.records import run, space_of
from tests.decisions.sim_study import STRESS, run_study


SPACE = """
    name: rp
    command: [python, -c, pass]
    params:
      a: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      d: {xla: xla_gpu_enable_while_loop_double_buffering, choices: [true]}
      algo: {env: NCCL_ALGO, choices: [Ring, Tree, NVLS]}
      t: {xla: xla_gpu_all_reduce_combine_threshold_bytes, type: int, low: 1048576, high: 1073741824, log: true}
    profiles:
      recipe: {xla: {xla_gpu_enable_triton_gemm: false, xla_gpu_enable_pipelined_all_gather: true}}
"""
OWN = "xla:xla_gpu_enable_triton_gemm"
RECIPE = {OWN: False, "a": True}


def rows(space, records, count, excluded=lambda n, v: False):
    """The first ``count`` rows the design asks, each recorded as asked before the next."""
    asked, out = [], []
    for _ in range(count):
        found = recipe_pair_row(space, {}, RECIPE, "recipe", records, asked, excluded)
        out.append(found)
        if found is not None:
            asked.append(config_of_settings(space, found[0], kind="probe", profile=found[1]).settings())
    return out


def test_each_value_the_recipe_lacks_runs_once_beside_its_own_flags(tmp_path):
    space = space_of(tmp_path, SPACE, "rp.yaml")
    found = rows(space, [run(space, 0, {}, 100.0)], MAX_PAIR_ROWS + 1)
    settings = [f[0] for f in found if f is not None]
    assert len(settings) == MAX_PAIR_ROWS and found[-1] is None
    assert all(s[OWN] is False and s["a"] is True for s in settings)  # the recipe stays whole
    assert sorted(s["algo"] for s in settings) == ["NVLS", "Ring", "Tree"]  # one algorithm a row
    assert sum(1 for s in settings if s.get("d") is True) == 1  # the boolean it lacks, in one row
    assert all("t" not in s for s in settings)  # numbers are no few-level setting
    assert found[0][1].startswith("recipe + values no run set beside its own flags: ")


def test_values_already_run_beside_the_recipe_and_values_left_out_are_skipped(tmp_path):
    space = space_of(tmp_path, SPACE, "rp.yaml")
    records = [run(space, 0, {}, 100.0), run(space, 1, {**RECIPE, "algo": "NVLS", "d": True}, 100.5),
               run(space, 2, {"algo": "Ring"}, 100.1)]  # Ring ran, but not beside the recipe's own flag
    found = rows(space, records, 3, excluded=lambda n, v: v == "Tree")
    assert [settings_of_record(space, config_of_settings(space, f[0], kind="probe", profile="").settings())
            if f else None for f in found] == [{**RECIPE, "algo": "Ring"}, None, None]


def test_no_rows_for_a_profile_without_flags_of_its_own(tmp_path):
    space = space_of(tmp_path, SPACE, "rp.yaml")
    assert recipe_pair_row(space, {}, {"a": True}, "gather", [run(space, 0, {}, 100.0)], [],
                           lambda n, v: False) is None


def test_a_value_that_pays_only_beside_the_recipe_is_run_there_and_wins(tmp_path):
    land = load_landscape("stress-recipe-partner", STRESS)
    recipe = {"xla": {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cudnn_fmha": True,
                      "xla_gpu_enable_pipelined_all_gather": True}}
    assert land.true_gain({"NCCL_ALGO": "Tree"}) < 0 < land.true_gain(recipe) < 0.01
    runner, verdict = run_study(land, tmp_path, 2)
    beside = [r for r in runner.records() if r.attrs.get("design") == RECIPE_PAIRS and r.ok
              and r.attrs["settings"]["env"].get("NCCL_ALGO") == "Tree"]
    assert beside, [r.profile for r in runner.records()]
    assert verdict is not None and verdict.reason == "win", verdict.message if verdict else None
    assert land.true_gain(verdict.winner["settings"]) > land.best().gain - 0.01
