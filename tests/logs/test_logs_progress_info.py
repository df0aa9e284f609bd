"""last_step on growing logs, and run_info on version / device / config lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from flagopt.logs import LogParseError, last_step, load_info_patterns, parse_steps, run_info

Reader = Callable[[str], str]


def test_last_step_on_a_log_cut_mid_line(read_log: Reader) -> None:
    text = read_log("h200x2_fsdp_log_base_a.txt")
    cut = text.index("completed step: 11,") + len("completed step: 1")  # "...step: 11" half written
    assert last_step(text[:cut]) == 10
    assert last_step(text[: cut + 1]) == 10  # "11" could still become "110"
    assert last_step(text[: cut + 2]) == 11
    assert last_step(text) == 14


def test_last_step_before_any_step_and_on_multi_host_logs(read_log: Reader) -> None:
    assert last_step("") is None
    assert last_step("Jax distributed system initialized on GPU!\n") is None
    # Ray prints step 99 from both hosts, then other lines: the highest step wins, not the last printed line.
    assert last_step(read_log("05_maxtext_ray_tpu_v4_16_multihost_dedup.log")) == 99
    assert last_step("completed step: 9, s\ncompleted step: 8, s\n") == 9


def test_last_step_agrees_with_parse_steps_on_every_fixture(fixtures_dir: Path) -> None:
    for path in sorted(fixtures_dir.iterdir()):
        text = path.read_text(encoding="utf-8")
        steps = [s.step for s in parse_steps(text, field="seconds")]
        assert last_step(text) == max(steps), path.name


def test_last_step_rejects_an_unknown_format() -> None:
    with pytest.raises(LogParseError, match="unknown log format"):
        last_step("", fmt="json")


def test_run_info_nccl_and_absl_lines_first_statement_wins() -> None:
    log = "\n".join(
        [
            "I1121 23:22:37.115195   20305 train.py:88] System Information: Jax Version: 0.11.2",
            "I1121 23:22:37.115300   20305 train.py:89] System Information: Jaxlib Version: 0.11.2",
            "gpu-0:20305:20611 [0] NCCL INFO NCCL version 2.28.3+cuda13.0",
            "gpu-0:20306:20612 [1] NCCL INFO NCCL version 2.27.0+cuda12.9",
            "Num_devices: 2, shape (1, 2, 1, 1)",
            "System Information: Jax Version: 0.4.30",
        ]
    )
    info = run_info(log)
    assert info == {
        "jax_version": "0.11.2",
        "jaxlib_version": "0.11.2",
        "nccl_version": "2.28.3+cuda13.0",
        "num_devices": "2",
        "mesh_shape": "(1, 2, 1, 1)",
    }


def test_run_info_of_the_reference_workload_header() -> None:
    info = run_info("System Information: Jax Backend: gpu\nNum_devices: 2, device kind: NVIDIA H200\n")
    assert info == {"jax_backend": "gpu", "num_devices": "2", "device_kind": "NVIDIA H200"}


def test_run_info_of_a_log_without_facts_is_empty() -> None:
    assert run_info("completed step: 0, seconds: 1.0, loss: 1.0\n") == {}


def test_a_custom_table_extends_run_info(tmp_path: Path) -> None:
    table = tmp_path / "info.yaml"
    table.write_text("- key: host\n  pattern: 'running on (?P<value>\\S+)'\n", encoding="utf-8")
    patterns = load_info_patterns(str(table))
    assert run_info("running on node-007\n", patterns) == {"host": "node-007"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("key: x\n", "must be a list"),
        ("- key: x\n", r"\[0\]: each entry needs"),
        ("- key: x\n  pattern: '(unclosed'\n", r"\[0\]\.pattern: not a valid regular expression"),
        ("- key: x\n  pattern: 'v(\\d+)'\n", r"\(\?P<value>\.\.\.\)"),
        ("- key: 'c.{name}'\n  pattern: 'c (?P<value>\\d+)'\n", r"\(\?P<name>\.\.\.\)"),
    ],
)
def test_bad_tables_name_the_row(tmp_path: Path, text: str, message: str) -> None:
    table = tmp_path / "bad.yaml"
    table.write_text(text, encoding="utf-8")
    with pytest.raises(LogParseError, match=message) as err:
        load_info_patterns(str(table))
    assert str(err.value).startswith(str(table))


def test_the_packaged_table_loads() -> None:
    keys = {row.key for row in load_info_patterns()}
    assert {"jax_version", "jaxlib_version", "nccl_version", "num_devices", "config.{name}"} <= keys


def test_the_package_is_a_pure_core() -> None:
    # flagopt.logs is imported by the study driver and by readers of records: it must not pull in optuna,
    # submitit or jax.
    import subprocess
    import sys

    code = "import sys, flagopt.logs; print(sorted(m for m in ('optuna', 'submitit', 'jax') if m in sys.modules))"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert result.stdout.strip() == "[]"
