"""Issue 22 D17: output into a closed pipe or onto a full device is a quiet exit or one line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hardening.conftest import run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def study(space, tmp_path) -> list[str]:
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert run(space, storage, "--trials", "2") == 0
    return ["--storage", storage]


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
