"""Which runs a study dumps to compare with the deployed job's program (flagopt.study._same_program): the first run
of an XLA-only probe or profile, once the evidence run's dump is there; never with ``evidence`` off."""

from __future__ import annotations

import textwrap

from flagopt.decide import RunRecord, config_of_settings
from flagopt.space import load_space
from flagopt.study._same_program import dumps_program

SPACE = """
    name: dumps
    command: [python, -c, pass]
    evidence: {evidence}
    params:
      pipe: {{xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}}
      proto: {{env: NCCL_PROTO, choices: [Simple]}}
"""


def space_with(tmp_path, evidence: bool):
    path = tmp_path / f"dumps-{evidence}.yaml"
    path.write_text(textwrap.dedent(SPACE.format(evidence=str(evidence).lower())))
    return load_space(path)


def test_only_first_runs_of_xla_only_configurations_are_dumped_once_the_deployed_dump_is_there(tmp_path):
    space = space_with(tmp_path, True)
    (tmp_path / "t1" / "hlo").mkdir(parents=True)
    evidence = RunRecord(1, "evidence", "evidence", "", "ok", 100.0, 1.0, None,
                         attrs={"trial_dir": str(tmp_path / "t1")})
    pipe = config_of_settings(space, {"pipe": True}, kind="probe", profile="pipe=true")
    proto = config_of_settings(space, {"proto": "Simple"}, kind="probe", profile="proto=Simple")
    mixed = config_of_settings(space, {"pipe": True, "proto": "Simple"}, kind="probe", profile="both")
    assert not dumps_program(space, "probe", pipe, lambda: [])  # nothing to compare with yet
    assert dumps_program(space, "probe", pipe, lambda: [evidence])
    assert dumps_program(space, "profile", pipe, lambda: [evidence])
    assert not dumps_program(space, "repeat", pipe, lambda: [evidence])
    # an env variable can change speed with the same program
    assert not dumps_program(space, "probe", proto, lambda: [evidence])
    assert not dumps_program(space, "probe", mixed, lambda: [evidence])
    ran = RunRecord(2, "probe", "pipe=true", pipe.config_key, "ok", 101.0, 2.0, None)
    assert not dumps_program(space, "probe", pipe, lambda: [evidence, ran])  # its first run was compared already
    assert not dumps_program(space_with(tmp_path, False), "probe", pipe, lambda: [evidence])
