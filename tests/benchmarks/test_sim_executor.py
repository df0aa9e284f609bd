"""SimExecutor is a faithful fake: the same log and exit status as ``python -m flagopt.workloads.sim``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks._sim_executor import VIRTUAL_EPOCH, SimExecutor
from flagopt.executors import TrialLaunch
from flagopt.failures import classify
from flagopt.logs import parse_steps

SIM = (sys.executable, "-m", "flagopt.workloads.sim")
AG = "xla_gpu_all_gather_combine_threshold_bytes"
#: This checkout first: the job must run the code under test, not an installed copy.
REPO = str(Path(__file__).resolve().parents[2])
# Failure blocks carry the wall-clock time and pid of the process that printed them.
_STAMP = re.compile(r"^\S+ \S+: ([WEF]) |^[WEF]\d{4} \S+\s+\d+ ", re.M)


def subprocess_run(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "NCCL_ALGO", "FLAGOPT_SIM_STATE")}
    return subprocess.run([*SIM, *args], env={**clean, **env, "PYTHONPATH": REPO}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)


def submit_n(executor: SimExecutor, n: int, argv: tuple[str, ...], env: dict[str, str | None], tmp_path: Path):
    jobs = [executor.submit(TrialLaunch(argv, env, str(tmp_path), str(tmp_path / f"t{i}"))) for i in range(n)]
    return [job.result().rank0 for job in jobs]


def test_same_seed_and_launch_give_the_subprocess_steps(tmp_path: Path) -> None:
    env = {"XLA_FLAGS": f"--{AG}=1073741824 --xla_gpu_enable_pipelined_all_gather --{AG}=134217728",
           "NCCL_ALGO": "Tree"}
    executor = SimExecutor(tmp_path / "jobs", base_env={})
    outcomes = submit_n(executor, 6, (*SIM, "landscape=win10", "seed=7", "steps=15"), dict(env), tmp_path)
    real = subprocess_run(["landscape=win10", "seed=7", "steps=15", "launch=5"], env, tmp_path)
    assert real.returncode == 0 and outcomes[5].exit_code == 0
    fake = Path(outcomes[5].log_path).read_text()
    assert fake == real.stdout
    steps = parse_steps(fake, fmt="maxtext", field="Tokens/s/device")
    assert [s.step for s in steps] == list(range(15))
    # launch 0 differs from launch 5: the counter moves, and with it drift and noise
    assert Path(outcomes[0].log_path).read_text() != fake


def test_env_comes_from_the_launch_over_the_inherited_environment(tmp_path: Path) -> None:
    argv = (*SIM, "landscape=win10", "seed=1", "launch=0")
    inherited = SimExecutor(tmp_path / "a", base_env={"NCCL_ALGO": "Tree"})
    removed = SimExecutor(tmp_path / "b", base_env={"NCCL_ALGO": "Tree"})
    tree = Path(submit_n(inherited, 1, argv, {}, tmp_path / "a")[0].log_path).read_text()
    unset = Path(submit_n(removed, 1, argv, {"NCCL_ALGO": None}, tmp_path / "b")[0].log_path).read_text()
    real_tree = subprocess_run(list(argv[3:]), {"NCCL_ALGO": "Tree"}, tmp_path)
    assert tree == real_tree.stdout and unset != tree


def test_failures_match_the_subprocess_and_classify_alike(tmp_path: Path) -> None:
    executor = SimExecutor(tmp_path / "jobs", base_env={})
    cases = [("oom", {"XLA_FLAGS": f"--{AG}=68719476736"}), ("unknown-flag",
             {"XLA_FLAGS": "--xla_gpu_enable_async_collectives=true"})]
    for expected, env in cases:
        argv = (*SIM, "landscape=fsdp64", "seed=0", "launch=3")
        fake = submit_n(executor, 1, argv, dict(env), tmp_path / expected)[0]
        real = subprocess_run(list(argv[3:]), env, tmp_path)
        assert fake.exit_code == real.returncode != 0  # fsdp64's jaxlib 0.6 aborts: -6 on an unknown flag
        text = Path(fake.log_path).read_text()
        assert _STAMP.sub("", text) == _STAMP.sub("", real.stderr)
        failure = classify(text, exit_code=fake.exit_code)
        assert failure is not None and failure.failure_class == expected


def test_virtual_clock_moves_one_period_per_launch(tmp_path: Path) -> None:
    executor = SimExecutor(tmp_path / "jobs", period_s=90.0, base_env={})
    outcomes = submit_n(executor, 3, (*SIM, "landscape=null", "seed=2"), {}, tmp_path)
    assert [o.started_at - VIRTUAL_EPOCH for o in outcomes] == [0.0, 90.0, 180.0]
    assert all(o.started_at < o.first_step_at <= o.last_step_at == o.ended_at < o.started_at + 90 for o in outcomes)
    assert executor.launches == 3
