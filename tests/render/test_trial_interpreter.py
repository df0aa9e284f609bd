"""Which interpreter a trial's command starts (pre-flight asks it for its jax); whether anything is deployed."""

from __future__ import annotations

import shutil
import sys
import textwrap

import pytest

from flagopt.render import baseline_configs, render, trial_interpreter
from flagopt.space import load_space


def space_with(tmp_path, command: str, baseline: str = "{}"):
    path = tmp_path / "space.yaml"
    (tmp_path / "job").mkdir(exist_ok=True)  # a local workdir must exist (validated at load)
    path.write_text(textwrap.dedent(f"""
        name: t
        command: {command}
        workdir: {tmp_path / "job"}
        baseline: {baseline}
    """))
    return load_space(path)


def test_the_placeholder_is_flagopts_own_interpreter(tmp_path):
    assert trial_interpreter(space_with(tmp_path, '["{python}", "-m", "train"]')) == sys.executable


def test_a_relative_interpreter_path_is_taken_from_the_workdir_as_popen_does(tmp_path):
    space = space_with(tmp_path, '[".venv-maxtext/bin/python", "-m", "maxtext.trainers.pre_train.train"]')
    assert trial_interpreter(space) == str(tmp_path / "job" / ".venv-maxtext" / "bin" / "python")
    assert render(space, baseline_configs(space)[0], inherited={}).argv[0] == ".venv-maxtext/bin/python"


@pytest.mark.parametrize("name", ["python3", "python", "python3.12"])
def test_a_bare_python_name_is_looked_up_on_path(tmp_path, name):
    assert trial_interpreter(space_with(tmp_path, f'["{name}", "-m", "MaxText.train"]')) == (shutil.which(name) or name)


@pytest.mark.parametrize("command", ['["bash", "train.sh"]', '["srun", "python3", "train.py"]',
                                     '["./python-wrapper.sh"]', '["pythonic"]'])
def test_other_programs_are_not_asked(tmp_path, command):
    assert trial_interpreter(space_with(tmp_path, command)) is None


def test_baseline_no_env_is_due_only_when_something_is_deployed(tmp_path):
    assert not space_with(tmp_path, '["true"]', "{args: {per_device_batch_size: 1}}").baseline.has_deployed_env
    for deployed in ('{xla_flags: "--xla_gpu_enable_latency_hiding_scheduler=true"}', "{env: {NCCL_PROTO: Simple}}",
                     '{libtpu_flags: "--xla_tpu_enable_async_collective_fusion=true"}'):
        assert space_with(tmp_path, '["true"]', deployed).baseline.has_deployed_env, deployed
    # And when it is not, baseline-no-env would render the very same trial.
    space = space_with(tmp_path, '["true"]', "{args: {per_device_batch_size: 1}}")
    deployed, no_env = (render(space, c, inherited={"XLA_FLAGS": "--xla_a=1"}) for c in baseline_configs(space))
    assert (deployed.argv, deployed.env) == (no_env.argv, no_env.env)
