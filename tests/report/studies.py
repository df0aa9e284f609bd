"""Real studies for the report/export/dashboard tests: the real driver (``python -m flagopt run``) on the simulator.

Built once per test session (under pytest's base temp) and shared read-only; a test that writes to a study
copies the sqlite file first (:func:`private_copy`).

* ``sim-llm-fsdp`` (FSDP=64, landscape fsdp64): hostile-looking env/flag values, an unknown flag, an OOM, a
  harmful profile (overlap limit 2, -4.1 %), then the +11.6 % threshold profile that becomes the confirmed winner.
* ``sim-llm-pp`` (PP=4, landscape pp64): the same overlap-limit profile helps here (+4.8 %): a sign flip; then
  sampled trials until the budget (parameter importances), with a workload argument profile.
* ``sim-llm-partial`` (another model tag): three runs and no verdict, so its export is UNCONFIRMED.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from flagopt.report import StudyData, study_data

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_ENV = "a*b?[c]{d,e}~#!(f)%^=,:@+"
HOSTILE_FLAG = "x*y?{z}"

FSDP = """
name: sim-llm-fsdp
model_tag: sim-llm
parallelism: FSDP=64
command: ["{{python}}", "-m", "flagopt.workloads.sim", "landscape=fsdp64", "seed=3", "steps=15"]
timeout_min: 2
baseline:
  xla_flags: "--xla_gpu_all_gather_combine_threshold_bytes=8589934592 --xla_gpu_reduce_scatter_combine_threshold_bytes=8589934592 --xla_gpu_enable_latency_hiding_scheduler=true"
  env: {{NCCL_PROTO: Simple, FLAGOPT_SIM_STATE: "{state}"}}
  defaults: {{xla_gpu_all_gather_combine_threshold_bytes: 31457287, xla_gpu_reduce_scatter_combine_threshold_bytes: 31457287,
             xla_gpu_enable_latency_hiding_scheduler: false, FLAGOPT_SIM_STATE: "{state}"}}
profiles:
  overlap2: {{xla: {{xla_gpu_experimental_parallel_collective_overlap_limit: 2}}}}
  hostile: {{env: {{NCCL_HOSTILE: "{hostile_env}"}}, xla: {{xla_gpu_hostile_value: "{hostile_flag}"}}}}
  async_old: {{xla: {{xla_gpu_enable_async_collectives: true}}}}
  ag64g: {{xla: {{xla_gpu_all_gather_combine_threshold_bytes: 68719476736}}}}
  ag1g: {{xla: {{xla_gpu_all_gather_combine_threshold_bytes: 1073741824}}}}
stop: {{win: 0.05, null_gain: 0.02, max_null: 8, max_trials: 16}}
noise: {{min_runs: 2, max_repeats: 3}}
"""

PP = """
name: sim-llm-pp
model_tag: sim-llm
parallelism: PP=4
command: ["{{python}}", "-m", "flagopt.workloads.sim", "landscape=pp64", "seed=5", "steps=15"]
timeout_min: 2
baseline:
  env: {{FLAGOPT_SIM_STATE: "{state}"}}
  args: {{num_pipeline_microbatches: 16}}
params:
  overlap: {{xla: xla_gpu_experimental_parallel_collective_overlap_limit, type: int, low: 1, high: 4}}
  proto: {{env: NCCL_PROTO, choices: [LL, LL128, Simple]}}
profiles:
  overlap2: {{xla: {{xla_gpu_experimental_parallel_collective_overlap_limit: 2}}}}
  mb32: {{args: {{num_pipeline_microbatches: 32}}}}
seed: 7
screen: false
stop: {{win: 0.5, null_gain: 0.03, max_null: 40, max_trials: 22}}
noise: {{min_runs: 2, max_repeats: 3, baseline_every: 4}}
"""

PARTIAL = """
name: sim-llm-partial
model_tag: sim-other
parallelism: TP=2
command: ["{{python}}", "-m", "flagopt.workloads.sim", "landscape=win10", "seed=2", "steps=15"]
timeout_min: 2
baseline:
  env: {{FLAGOPT_SIM_STATE: "{state}"}}
profiles:
  tree: {{env: {{NCCL_ALGO: Tree}}}}
export: {{guard: false}}
"""


@dataclass(frozen=True)
class Built:
    """Where the studies live."""

    folder: Path
    db: Path

    @property
    def storage(self) -> str:
        return f"sqlite:///{self.db}"


def run_driver(space: Path, storage: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "FLAGOPT_STORAGE")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                           "--no-preflight", "--quiet", *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


@functools.cache
def studies(base: Path) -> Built:
    """Run the three studies once per session into ``base/flagopt-studies``."""
    folder = base / "flagopt-studies"
    folder.mkdir(parents=True, exist_ok=True)
    built = Built(folder, folder / "studies.sqlite")
    for name, template, extra in (("fsdp", FSDP, ()), ("pp", PP, ()), ("partial", PARTIAL, ("--trials", "3"))):
        space = folder / f"{name}.yaml"
        space.write_text(template.format(state=folder / f"{name}.state", hostile_env=HOSTILE_ENV,
                                         hostile_flag=HOSTILE_FLAG))
        done = run_driver(space, built.storage, *extra)
        if done.returncode != 0:
            raise RuntimeError(f"driver failed on {name}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return built


def private_copy(built: Built, dest: Path) -> Built:
    """A copy of the storage a test may write to (notes, figures); trial folders stay shared."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(built.db, dest / "studies.sqlite")
    return Built(dest, dest / "studies.sqlite")


# -- fixtures (imported by the conftest of tests/report, tests/export and tests/dashboard) ---------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return studies(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def fsdp(built: Built) -> StudyData:
    return study_data(built.storage, "sim-llm-fsdp")


@pytest.fixture(scope="module")
def pp(built: Built) -> StudyData:
    return study_data(built.storage, "sim-llm-pp")


@pytest.fixture(scope="module")
def partial(built: Built) -> StudyData:
    return study_data(built.storage, "sim-llm-partial")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """``flagopt.cli.main`` with this part's verbs registered (a no-op once VERBS lists them)."""
    import flagopt.cli as cli_mod
    from flagopt.cli import _dashboard, _export, _report, _status
    extra = [m for m in (_export, _report, _status, _dashboard) if m not in cli_mod.VERBS]
    monkeypatch.setattr(cli_mod, "VERBS", [*cli_mod.VERBS, *extra])
    return cli_mod.main
