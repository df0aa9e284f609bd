"""Whether two XLA dumps are the same program: real 2xH200 dumps of one job three ways, and real JAX on CPU."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flagopt.errors import FlagoptError
from flagopt.evidence import compare_programs, compare_texts

ROOT = Path(__file__).resolve().parents[2]
H200X2 = ROOT / "docs/validation/h200x2/engine25-head3/same_program"
PP = ROOT / "tests/fixtures/hlo/h200x2_lm_pp/module_jit_train_step.after_optimizations.txt"


def h200x2(value: str) -> str:
    """The 2xH200 FSDP job's optimized train step with the pipelined reduce-scatter unset, true or false."""
    return gzip.decompress((H200X2 / f"xla_gpu_enable_pipelined_reduce_scatter_{value}.txt.gz").read_bytes()).decode()


def test_a_flag_that_compiles_to_the_deployed_program_is_the_same_program_on_the_real_h200x2_dumps() -> None:
    unset = h200x2("unset")
    for value, moved in (("true", 2), ("false", 3)):
        other = h200x2(value)
        assert other != unset  # autotuned GEMM algorithms and fingerprints differ between the compiles
        comparison = compare_texts(unset, other)
        assert comparison.same and comparison.differing == 0
        assert comparison.reordered == moved  # small fusions the scheduler placed elsewhere
    different = compare_texts(unset, PP.read_text())  # the pipeline-parallel job: another program
    assert not different.same and different.differing > 1000
    assert all(" = " in line for line in different.only_first)  # instructions are shown, not lone braces


def test_the_source_locations_a_dump_carries_are_not_the_program() -> None:
    unset = h200x2("unset")
    moved = unset.replace("/work/main/flagopt/", "/home/someone/checkout/flagopt/")
    assert moved != unset
    assert compare_texts(unset, moved).same
    # but one changed operand is
    changed = unset.replace("dimensions={0,3,1,2}", "dimensions={0,3,2,1}", 1)
    result = compare_texts(unset, changed)
    assert not result.same and result.differing == 2
    assert "dimensions={0,3,2,1}" in result.only_second[0]


def dump(folder: Path, flags: str) -> Path:
    """Compile a small jitted train step with real JAX on CPU, its HLO dumped with ``flags`` added."""
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp
        @jax.jit
        def train_step(w, x):
            return jnp.tanh(x @ w).sum() * 2.0 + jnp.exp(w).mean()
        print(train_step(jnp.ones((64, 64)), jnp.ones((8, 64))))
    """)
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_dump_to={folder} --xla_dump_hlo_as_text {flags}".strip()}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, timeout=300)
    return folder


def evidence(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flagopt", "evidence", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_real_jax_a_gpu_flag_on_cpu_is_the_same_program_and_no_passes_is_not(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    plain = dump(tmp_path / "plain", "")
    gpu_flag = dump(tmp_path / "gpu_flag", "--xla_gpu_enable_pipelined_all_gather=true")
    no_passes = dump(tmp_path / "no_passes", "--xla_disable_all_hlo_passes=true")
    assert compare_programs(plain, gpu_flag).same  # the directory's train-step module is picked
    same = evidence(plain, "--same-as", gpu_flag)
    assert same.returncode == 0 and "same program" in same.stdout, same.stderr
    differ = evidence(plain, "--same-as", no_passes)
    assert differ.returncode == 1 and "different programs" in differ.stdout, differ.stderr
    assert "only in the first" in differ.stdout and "only in the second" in differ.stdout


def test_a_missing_dump_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FlagoptError, match="no such file"):
        compare_programs(tmp_path / "nothing", PP)
    result = evidence(tmp_path / "nothing", "--same-as", PP)
    assert result.returncode == 2 and "no such file or directory" in result.stderr
    assert result.stderr.count("\n") == 1
