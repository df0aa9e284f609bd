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


def s0_space(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """S0 written to ``folder``, run from there, with no storage or artifacts folder taken from the environment."""
    monkeypatch.chdir(folder)
    monkeypatch.delenv("FLAGOPT_ARTIFACTS", raising=False)
    monkeypatch.delenv("FLAGOPT_STORAGE", raising=False)
    path = folder / "s0.yaml"
    path.write_text(textwrap.dedent(S0))
    return path


@pytest.fixture
def space(tmp_path: Path, monkeypatch) -> Path:
    return s0_space(tmp_path, monkeypatch)


def run(space: Path, storage: str, *extra: str) -> int:
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err
