"""Rendering: deployed flags first, trial flags appended (last-wins), restore_default, env and args."""

from __future__ import annotations

import sys
import textwrap

from flagopt.render import baseline_configs, config_from_params, render
from flagopt.space import TrialConfig, load_space

SPACE = """
name: r
command: ["{python}", "-m", "train", "steps=15"]
baseline:
  xla_flags: ["--xla_gpu_enable_latency_hiding_scheduler=true", "--xla_gpu_all_gather_combine_threshold_bytes=8589934592"]
  env: {NCCL_PROTO: Simple, CUDA_DEVICE_MAX_CONNECTIONS: "1"}
  args: {per_device_batch_size: 2}
  defaults:
    xla_gpu_enable_latency_hiding_scheduler: false
    xla_gpu_all_gather_combine_threshold_bytes: 31457287
    CUDA_DEVICE_MAX_CONNECTIONS: 8
params:
  ag:
    xla: xla_gpu_all_gather_combine_threshold_bytes
    choices: [1073741824]
  mb:
    arg: num_pipeline_microbatches
    choices: [16]
  proto:
    env: NCCL_PROTO
    choices: [LL128]
  tpu:
    libtpu: xla_tpu_enable_async_collective_fusion
    choices: [true]
"""


def space(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(SPACE))
    return load_space(path)


def last_value(flags: str, name: str) -> str:
    """How XLA reads a repeated flag: the last occurrence wins."""
    value = None
    for token in flags.split():
        if token.startswith(f"--{name}="):
            value = token.split("=", 1)[1]
    return value


def test_trial_flags_are_appended_after_inherited_and_deployed(tmp_path):
    s = space(tmp_path)
    config = config_from_params(s, {"ag": 1073741824, "mb": 16, "proto": "LL128", "tpu": True})
    r = render(s, config, inherited={"XLA_FLAGS": "--xla_image_flag=1"})
    tokens = r.xla_flags.split()
    assert tokens[0] == "--xla_image_flag=1"  # never rebuilt from scratch
    assert tokens[1:3] == list(s.baseline.xla_flags)
    assert tokens[-1] == "--xla_gpu_all_gather_combine_threshold_bytes=1073741824"
    assert last_value(r.xla_flags, "xla_gpu_all_gather_combine_threshold_bytes") == "1073741824"
    assert last_value(r.xla_flags, "xla_gpu_enable_latency_hiding_scheduler") == "true"
    assert r.env["LIBTPU_INIT_ARGS"] == "--xla_tpu_enable_async_collective_fusion=true"
    assert r.env["NCCL_PROTO"] == "LL128" and r.env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert r.argv == (sys.executable, "-m", "train", "steps=15", "per_device_batch_size=2", "num_pipeline_microbatches=16")


def test_baseline_deployed_is_the_deployed_state(tmp_path):
    s = space(tmp_path)
    deployed, _ = baseline_configs(s)
    r = render(s, deployed, inherited={})
    assert r.xla_flags.split() == list(s.baseline.xla_flags)
    assert r.env["NCCL_PROTO"] == "Simple"
    assert "LIBTPU_INIT_ARGS" not in r.env


def test_baseline_no_env_restores_every_deployed_setting_to_its_default(tmp_path):
    s = space(tmp_path)
    _, no_env = baseline_configs(s)
    r = render(s, no_env, inherited={"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"})
    assert last_value(r.xla_flags, "xla_gpu_enable_latency_hiding_scheduler") == "false"
    assert last_value(r.xla_flags, "xla_gpu_all_gather_combine_threshold_bytes") == "31457287"
    assert r.env["CUDA_DEVICE_MAX_CONNECTIONS"] == "8"  # a default was given
    assert r.env["NCCL_PROTO"] is None  # no default given: removed from the environment
    assert not r.notes


def test_restore_without_known_default_is_reported(tmp_path):
    s = space(tmp_path)
    from dataclasses import replace
    s = replace(s, baseline=replace(s.baseline, defaults=()))
    r = render(s, TrialConfig("baseline-no-env", "baseline-no-env"), inherited={})
    assert any("xla_gpu_enable_latency_hiding_scheduler" in n for n in r.notes)
    r2 = render(s, TrialConfig("baseline-no-env", "baseline-no-env"), inherited={},
                default_of=lambda name: {"xla_gpu_enable_latency_hiding_scheduler": False}.get(name))
    assert last_value(r2.xla_flags, "xla_gpu_enable_latency_hiding_scheduler") == "false"


def test_config_key_is_shared_by_repeats_and_differs_between_configs(tmp_path):
    a = TrialConfig("profile", "p", xla=(("xla_a", True),))
    b = TrialConfig("repeat", "p", xla=(("xla_a", True),))
    c = TrialConfig("profile", "p", xla=(("xla_a", False),))
    assert a.config_key == b.config_key != c.config_key
