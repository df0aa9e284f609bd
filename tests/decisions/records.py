"""A run record as the driver writes it, for the decision tests that hand the engine a study's records."""

from __future__ import annotations

import textwrap

from flagopt.decide import RunRecord, config_of_settings
from flagopt.space import load_space


def space_of(tmp_path, text: str, name: str = "space.yaml"):
    """The space of YAML ``text`` (indented as a test's literal), written to ``tmp_path / name`` and loaded."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_space(path)


def run(space, number, settings, value=None, *, design="probe", status="ok", failure=None) -> RunRecord:
    """Run ``number`` of ``settings`` (param name -> value; none: a control) measuring ``value`` tokens/s."""
    config = config_of_settings(space, settings, kind="probe", profile="p")
    attrs = {"settings": config.settings(), "design": design, "started_at": float(number)}
    if failure:
        attrs["failure_class"] = failure
    kind = "baseline-deployed" if not settings else "probe"
    return RunRecord(number, kind, kind if not settings else "p", config.config_key if settings else "", status,
                     value, float(number), None, attrs=attrs)


#: A two-param space (an ordinal overlap limit deployed at 1, a two-value NCCL protocol) for tests that hand the engine
#: a few runs.
OVERLAP_PROTO_SPACE = """
    name: m
    command: [python, -c, pass]
    params:
      overlap: {xla: xla_gpu_experimental_parallel_collective_overlap_limit, choices: [1, 2, 3, 4]}
      proto: {env: NCCL_PROTO, choices: [Simple, LL128]}
    baseline:
      xla_flags: "--xla_gpu_experimental_parallel_collective_overlap_limit=1"
"""
