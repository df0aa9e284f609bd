"""A combination whose run failed is run once more, then split into its parts (issue 25, defect 2): each of its
settings ran fine alone, so one failure may be the infrastructure's, and a second one is a setting that fails only
in company, which its drop-one variants find."""

from __future__ import annotations

import textwrap

from flagopt.decide import Planner, arms_of, settings_of_record
from flagopt.space import load_space
from tests.decisions.records import run

SPACE = """
    name: m
    command: [python, -c, pass]
    params:
      a: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      b: {xla: xla_gpu_enable_pipelined_reduce_scatter, choices: [true]}
      c: {env: NCCL_PROTO, choices: [Simple]}
"""


def load(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(SPACE))
    return load_space(path)


COMBO = {"a": True, "b": True, "c": "Simple"}


def screened(space):
    """Controls and the one-factor probes, each of which ran fine alone."""
    return [run(space, 0, {}, 100.0), run(space, 1, {"a": True}, 103.0), run(space, 2, {"b": True}, 102.0),
            run(space, 3, {}, 100.2), run(space, 4, {"c": "Simple"}, 101.5), run(space, 5, {}, 99.9)]


def screen(tmp_path, records):
    space = load(tmp_path)
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    return space, planner.next_screen(records, arms, [], None)


def test_a_failed_combination_runs_once_more_then_its_parts(tmp_path):
    space, combo = load(tmp_path), COMBO
    records = [*screened(space), run(space, 6, combo, design="combination", status="failed", failure="crash")]
    _, step = screen(tmp_path, records)
    assert step is not None and step[2] == "combination" and "once more after crash" in step[1]
    assert settings_of_record(space, step[0].settings()) == combo

    records.append(run(space, 7, combo, design="combination", status="failed", failure="crash"))
    _, step = screen(tmp_path, records)
    assert step is not None and step[2] == "drop-one" and "failed twice" in step[1]
    part = settings_of_record(space, step[0].settings())
    assert len(part) == 2 and set(part.items()) < set(combo.items())


def test_an_out_of_memory_combination_is_not_run_again_as_it_was(tmp_path):
    space, combo = load(tmp_path), COMBO
    records = [*screened(space), run(space, 6, combo, design="combination", status="infeasible", failure="oom")]
    _, step = screen(tmp_path, records)
    assert step is None or settings_of_record(space, step[0].settings()) != combo


SPACE4 = SPACE + """      d: {xla: xla_gpu_enable_while_loop_double_buffering, choices: [true]}
"""


def test_a_drop_one_that_still_runs_out_of_memory_is_split_in_turn(tmp_path):
    """stress-combo-oom: two settings that fail together inside a larger combination. Each drop-one of the whole
    combination that keeps both fails again; the smaller failing set is split next, toward the pair."""
    path = tmp_path / "m4.yaml"
    path.write_text(textwrap.dedent(SPACE4))
    space = load_space(path)
    combo = {**COMBO, "d": True}
    records = [*screened(space), run(space, 6, {"d": True}, 100.5), run(space, 7, {}, 100.1),
               run(space, 8, combo, design="combination", status="infeasible", failure="oom"),
               run(space, 9, {k: v for k, v in combo.items() if k != "d"}, design="drop-one", status="infeasible",
                   failure="oom")]
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    step = planner.next_screen(records, arms_of(records, space.noise), [], None)
    assert step is not None and step[2] == "drop-one", step
    part = settings_of_record(space, step[0].settings())
    assert len(part) == 2 and "d" not in part, part  # from the three that still failed, not the four
