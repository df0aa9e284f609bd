"""The one-factor screen's design: which values a probe tries, where it refines, what a config sets."""

from __future__ import annotations

import textwrap

from flagopt.space import Param, load_space
from flagopt.decide import (
    changed_settings,
    config_of_settings,
    deployed_values,
    probe_values,
    refine_values,
    same_value,
)

AG = Param("ag", "xla", "xla_gpu_all_gather_combine_threshold_bytes", type="int", low=2**26, high=2**36, log=True)


def space(tmp_path, body: str):
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(body))
    return load_space(path)


def test_a_wide_log_range_is_screened_every_two_octaves_without_the_deployed_value():
    values = probe_values(AG, str(2**28))
    assert [v.bit_length() - 1 for v in values] == [26, 30, 32, 34, 36]
    assert all(isinstance(v, int) for v in values)


def test_narrow_ranges_every_integer_and_choices_all_but_deployed():
    overlap = Param("overlap", "xla", "xla_gpu_experimental_parallel_collective_overlap_limit", type="int", low=1, high=4)
    assert probe_values(overlap, "1") == [2, 3, 4]
    proto = Param("proto", "env", "NCCL_PROTO", choices=("LL", "LL128", "Simple"))
    assert probe_values(proto, "Simple") == ["LL", "LL128"]
    assert probe_values(proto, None) == ["LL", "LL128", "Simple"]  # unset: every choice changes something
    flag = Param("p", "xla", "xla_gpu_enable_pipelined_all_gather", choices=(True, False))
    assert probe_values(flag, "false") == [True]


def test_a_float_range_is_screened_at_readable_values():
    """A linear float range's grid points are what a user would write (0.68, not 0.6799999999999999): they reach
    labels, flags and the exported env.sh as written."""
    fraction = Param("mem", "env", "XLA_PYTHON_CLIENT_MEM_FRACTION", type="float", low=0.5, high=0.95)
    values = probe_values(fraction, "0.75")
    assert values == [0.5, 0.59, 0.68, 0.77, 0.86, 0.95]
    assert refine_values(fraction, {0.77: 0.0, 0.86: 0.01, 0.95: 0.0}, "0.75") == [0.815, 0.905]
    stepped = Param("slop", "xla", "xla_gpu_memory_limit_slop_factor", type="float", low=0.5, high=0.95, step=0.1)
    assert probe_values(stepped, None) == [0.5, 0.6, 0.7, 0.8, 0.9]  # on its steps, within the range


def test_refinement_looks_halfway_to_the_neighbours_of_the_best_grid_point_only():
    measured = {2**26: 0.0, 2**28: 0.02, 2**30: 0.11, 2**32: 0.01, 2**33: 0.0}
    assert refine_values(AG, measured, str(2**33)) == [2**29, 2**31]
    # the deployed value is the best: nothing to refine
    assert refine_values(AG, {2**26: -0.01, 2**33: 0.0}, str(2**33)) == []
    # a categorical param has no neighbours
    assert refine_values(Param("c", "env", "X", choices=("a", "b")), {"a": 0.1, "b": 0.0}, "b") == []


def test_deployed_values_read_flags_env_args_and_defaults(tmp_path):
    s = space(tmp_path, """
        name: d
        command: [python, -c, pass]
        baseline:
          xla_flags: "--xla_gpu_enable_latency_hiding_scheduler=true --xla_a=1 --xla_a=2"
          env: {NCCL_PROTO: Simple}
          args: {mb: 16}
          defaults: {xla_b: 7}
        params:
          a: {xla: xla_a, type: int, low: 1, high: 8}
          b: {xla: xla_b, type: int, low: 1, high: 8}
          c: {xla: xla_c, choices: [true, false]}
          proto: {env: NCCL_PROTO, choices: [LL, Simple]}
          algo: {env: NCCL_ALGO, choices: [Ring, Tree]}
          mb: {arg: mb, choices: [8, 16, 32]}
    """)
    deployed = deployed_values(s, default_of=lambda name: False if name == "xla_c" else None)
    assert deployed == {"a": "2", "b": "7", "c": "false", "proto": "Simple", "algo": None, "mb": "16"}
    params = {"a": 2, "b": 3, "c": False, "proto": "LL", "algo": "Tree", "mb": 16}
    changed = changed_settings(s, params, deployed)
    assert changed == {"b": 3, "proto": "LL", "algo": "Tree"}
    config = config_of_settings(s, changed, kind="sampled", profile="sampled")
    assert config.settings() == {"xla": {"xla_b": 3}, "libtpu": {}, "env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Tree"},
                                 "args": {}}
    # a sampled point equal to a probe is the same arm
    probe = config_of_settings(s, {"proto": "LL"}, kind="probe", profile="proto=LL")
    without_algo = {k: v for k, v in params.items() if k != "algo"}
    sampled = config_of_settings(s, changed_settings(s, {**without_algo, "b": 7}, deployed),
                                 kind="sampled", profile="sampled")
    assert probe.config_key == sampled.config_key


def test_same_value_compares_numbers_as_numbers():
    assert same_value(AG, 1073741824, "1073741824.0")
    assert not same_value(AG, 1073741824, None)
    assert same_value(Param("c", "xla", "x", choices=(True, False)), True, "true")



def test_a_stated_default_is_the_deployed_value_and_never_probed(tmp_path):
    """issue 23 point 12: XLA's default eigen=true was probed six times; a param's `default:` says what runs."""
    for default, probed in (("default: true", [False]), ("", [True, False])):
        s = space(tmp_path, f"""
            name: d
            command: [python, -c, "pass"]
            params:
              eigen: {{xla: xla_cpu_use_eigen, choices: [true, false] {", " + default if default else ""}}}
        """)
        assert probe_values(s.param("eigen"), deployed_values(s)["eigen"]) == probed


def test_a_deployed_value_measured_best_is_refined_toward_its_better_neighbour_only_when_asked():
    """A microbatch count deployed at 16 between a bubble (8: -9 %) and a flat neighbour (32: -0.5 %): the peak may lie
    between 16 and 32, one run halfway (geometric) is worth it; the screen asks only where the param clearly matters."""
    mb = Param("mb", "args", "num_microbatches", type="int", low=4, high=64, log=True)
    measured = {8: -0.09, 16: 0.0, 32: -0.005, 64: -0.1}
    assert refine_values(mb, measured, "16") == []
    assert refine_values(mb, measured, "16", around_deployed=True) == [23]
    assert refine_values(mb, {8: -0.09, 16: 0.0, 32: -0.12}, "16", around_deployed=True) == [11]
