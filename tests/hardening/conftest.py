from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flagopt.cli import main

#: the issue's S0: a fast workload with one NCCL_PROTO param
S0 = """
    name: s0
    command: ["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]
    params: {proto: {env: NCCL_PROTO, choices: [Simple, LL]}}
    stop: {max_trials: 4}
"""


@pytest.fixture
def space(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAGOPT_ARTIFACTS", raising=False)
    monkeypatch.delenv("FLAGOPT_STORAGE", raising=False)
    path = tmp_path / "s0.yaml"
    path.write_text(textwrap.dedent(S0))
    return path


def run(space: Path, storage: str, *extra: str) -> int:
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err
