"""Issue 22 D17: output into a closed pipe or onto a full device is a quiet exit or one line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hardening.conftest import run, s0_space

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def s0_study(tmp_path_factory) -> list[str]:
    """One two-run study for the module: the verbs only read it."""
    folder = tmp_path_factory.mktemp("s0")
    with pytest.MonkeyPatch.context() as mp:  # as the `space` fixture sets up a test
        space = s0_space(folder, mp)
        storage = f"sqlite:///{folder}/studies/flagopt.db"
        assert run(space, storage, "--trials", "2") == 0
    return ["--storage", storage]


@pytest.fixture
def study(s0_study, monkeypatch) -> list[str]:
    monkeypatch.delenv("FLAGOPT_ARTIFACTS", raising=False)  # the verbs run in the environment `space` gives a test
    monkeypatch.delenv("FLAGOPT_STORAGE", raising=False)
    return s0_study


def flagopt(*argv: str, stdout) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flagopt", *argv], stdout=stdout, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("verb", [["leaderboard", "s0", "--json"], ["leaderboard", "s0", "--wide"], ["status", "s0"]])
def test_a_closed_pipe_is_a_quiet_exit(study, verb):
    read, write = os.pipe()
    os.close(read)  # `| head -c0`: the reader is gone before the first byte
    proc = flagopt(*verb, *study, stdout=write)
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and err == b"", err.decode()


@pytest.mark.parametrize("verb", [["leaderboard", "s0", "--json"], ["status", "s0"]])
def test_a_full_device_is_one_line(study, verb):
    with open("/dev/full", "w") as full:
        proc = flagopt(*verb, *study, stdout=full)
        _, err = proc.communicate(timeout=120)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 1 and lines == ["flagopt: error: cannot write (standard output or a file flagopt "
                                              "writes): No space left on device"], err.decode()
