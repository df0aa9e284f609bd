"""A setting whose run compiled to the deployed job's program (``same_program``, flagopt.study._same_program) has
exactly no effect: the effects model leaves it out, so no combination takes it, and its arm is neither raced nor
recommended, however high its run came out (on 2xH200 the pipelined reduce-scatter compiled to the deployed program,
and a study's export carried it; docs/validation/h200x2/engine25-head3/NOTES.md)."""

from __future__ import annotations

import textwrap

from flagopt.decide import Planner, RunRecord, arms_of, config_of_settings, settings_of_record
from flagopt.space import load_space

SPACE = """
    name: same
    command: [python, -c, pass]
    params:
      pipe: {xla: xla_gpu_enable_pipelined_reduce_scatter, choices: [true]}
      proto: {env: NCCL_PROTO, choices: [Simple]}
      overlap: {xla: xla_gpu_experimental_parallel_collective_overlap_limit, choices: [2]}
"""


def run(space, number, settings, value, **attrs):
    config = config_of_settings(space, settings, kind="probe", profile="p")
    kind = "probe" if settings else "baseline-deployed"
    return RunRecord(number, kind, "p" if settings else kind, config.config_key if settings else "", "ok", value,
                     float(number), None, attrs={"settings": config.settings(), "design": "probe", **attrs})


def planned(tmp_path, *, same_program: bool):
    path = tmp_path / "same.yaml"
    path.write_text(textwrap.dedent(SPACE))
    space = load_space(path)
    marks = {"same_program": True} if same_program else {}
    records = [run(space, 0, {}, 100.0), run(space, 1, {"pipe": True}, 103.5, **marks),
               run(space, 2, {"proto": "Simple"}, 101.5), run(space, 3, {"overlap": 2}, 101.0),
               run(space, 4, {}, 100.1), run(space, 5, {}, 99.9)]
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    return space, planner, records, arms_of(records, space.noise)


def pipe_arm(space, arms):
    return next(a for a in arms if "pipe" in settings_of_record(space, a.first.attrs["settings"]))


def test_a_setting_that_compiles_to_the_deployed_program_is_left_out_of_every_decision(tmp_path):
    space, planner, records, arms = planned(tmp_path, same_program=True)
    arm = pipe_arm(space, arms)
    assert arm.same_program and arm.estimate.gain > 0.03  # the run came out high: noise, drift
    assert "pipe=true" not in planner._model.fit.features  # no effect to estimate
    assert planner._model.predict({"pipe": True}).gain == 0.0
    assert arm not in planner.eligible(arms) and arm not in planner.candidates(arms, [])
    assert planner.combination(planner._model, []) == {"overlap": 2, "proto": "Simple"}
    assert planner.best_measured(arms) is not arm


def test_the_same_run_without_the_comparison_counts_as_a_measured_effect(tmp_path):
    space, planner, records, arms = planned(tmp_path, same_program=False)
    arm = pipe_arm(space, arms)
    assert not arm.same_program and arm in planner.eligible(arms)
    assert planner._model.effect("pipe", True)[0] > 0.01
    assert "pipe" in planner.combination(planner._model, [])
    assert planner.best_measured(arms) is arm
