"""Issue 22: every value is checked at load, so ``validate`` refuses what ``run`` would fail on (D4, D10, D13-D16).

Each case is one ``flagopt validate`` call that must exit 2 with one line naming the file, the key and the reason,
and write nothing.
"""

from __future__ import annotations

import os
import threading

import pytest

from flagopt.cli import main
from tests.space.test_hostile_input import refused, write

HEAD = "name: t\ncommand: [python3, -c, pass]\n"


@pytest.mark.parametrize("text,key", [
    # D10: a NUL in any value fails every run with "exit code None" (the OS refuses it in argv, env, paths)
    (HEAD + 'params: {p: {env: NCCL_PROTO, choices: ["Simple", "L\\0L"]}}\n', "params.p.choices[1]"),
    (HEAD + 'baseline: {env: {NCCL_ALGO: "Ri\\0ng"}}\n', "baseline.env.NCCL_ALGO"),
    (HEAD + 'baseline: {args: {steps: "1\\0"}}\n', "baseline.args.steps"),
    (HEAD + 'baseline: {xla_flags: "--xla_a=1\\0"}\n', "baseline.xla_flags"),
    (HEAD + 'baseline: {env_file: "x\\0.env"}\n', "baseline.env_file"),
    (HEAD + 'parallelism: "pp\\0"\n', "parallelism"),
    (HEAD + 'model_tag: "m\\0"\n', "model_tag"),
])
def test_a_nul_in_any_value_is_refused(tmp_path, capsys, text, key):
    err = refused(tmp_path, text, capsys)
    assert f": {key}: must not contain a NUL character" in err


def test_a_nul_in_the_env_file_content_is_refused(tmp_path, capsys):
    write(tmp_path, b"export A=1\x00\n", "deployed.env")
    err = refused(tmp_path, HEAD + "baseline: {env_file: deployed.env}\n", capsys)
    assert "baseline.env_file" in err and "contains a NUL character" in err


@pytest.mark.parametrize("text,key", [
    # D13: beyond float range: an OverflowError traceback, or (a choice) every run crashing
    (HEAD + "timeout_min: " + "9" * 400 + "\n", "timeout_min"),
    (HEAD + "stop: {max_trials: " + "9" * 400 + "}\n", "stop.max_trials"),
    (HEAD + "params: {p: {xla: xla_gpu_all_gather_combine_threshold_bytes, choices: [1, " + "9" * 400 + "]}}\n",
     "params.p.choices[1]"),
    (HEAD + "params: {p: {xla: xla_x, type: int, low: 1, high: " + "9" * 400 + "}}\n", "params.p.high"),
])
def test_integers_beyond_64_bits_are_refused(tmp_path, capsys, text, key):
    err = refused(tmp_path, text, capsys)
    assert f": {key}: must be within +-(2**63 - 1)" in err


def test_a_window_of_10_to_the_20_steps_is_refused(tmp_path, capsys):
    # D4: the driver built a tuple over the window and grew until the kernel killed it
    err = refused(tmp_path, HEAD + "metric: {window: [0, 100000000000000000000]}\n", capsys)
    assert ": metric.window[1]: must be within +-(2**63 - 1)" in err
    err = refused(tmp_path, HEAD + "metric: {window: [0, 1000000000000000000]}\n", capsys)
    assert ": metric.window: at most 100,000 steps" in err
    err = refused(tmp_path, HEAD + "metric: {window: [0, 200000]}\n", capsys)
    assert ": metric.window: at most 100,000 steps" in err


@pytest.mark.parametrize("slurm,key", [
    # D14: validate accepted what run refused (and run left a sqlite file and a study folder behind)
    ("{nodes: 0}", "executor.slurm.nodes"),
    ("{time: -5}", "executor.slurm.time"),
    ("{tasks_per_node: 0}", "executor.slurm.tasks_per_node"),
    ("{gpus_per_node: -1}", "executor.slurm.gpus_per_node"),
    ("{pending_deadline_min: 0}", "executor.slurm.pending_deadline_min"),
])
def test_slurm_settings_run_refuses_are_refused_by_validate(tmp_path, capsys, slurm, key):
    err = refused(tmp_path, HEAD + f"executor: {{kind: slurm, slurm: {slurm}}}\n", capsys)
    assert f": {key}: must be" in err


def test_a_missing_workdir_or_a_file_is_refused(tmp_path, capsys):
    # D15: passed validate and pre-flight, then every run crashed
    err = refused(tmp_path, HEAD + f"workdir: {tmp_path}/nowhere\n", capsys)
    assert f": workdir: {tmp_path}/nowhere does not exist" in err
    (tmp_path / "afile").write_text("")
    err = refused(tmp_path, HEAD + f"workdir: {tmp_path}/afile\n", capsys)
    assert f": workdir: {tmp_path}/afile is not a folder" in err


def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path, capsys):
    # D16: a FIFO hung validate; a symlink to /dev/zero read without end
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    answer: list[int] = []
    worker = threading.Thread(target=lambda: answer.append(main(["validate", "--space", str(fifo)])), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert answer == [2], "validate blocked on a FIFO"
    assert "is not a regular file" in capsys.readouterr().err
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    assert main(["validate", "--space", str(zero)]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a regular file" in err and "\n" not in err
    write(tmp_path, "x.env", "unused")
    err = refused(tmp_path, HEAD + "baseline: {env_file: /dev/zero}\n", capsys)
    assert "baseline.env_file" in err and "/dev/zero is not a regular file" in err


def test_a_budget_of_one_with_something_deployed_is_refused(tmp_path, capsys):
    # D19: max_trials: 1 with a deployed env ran 2 trials (baseline-deployed and baseline-no-env)
    err = refused(tmp_path, HEAD + "baseline: {env: {NCCL_PROTO: Simple}}\nstop: {max_trials: 1}\n", capsys)
    assert ": stop.max_trials: 1 cannot hold the two baselines a study with a deployed env runs first" in err
    path = write(tmp_path, HEAD + "stop: {max_trials: 1}\n", "plain.yaml")  # nothing deployed: one run is a study
    assert main(["validate", "--space", str(path)]) == 0
