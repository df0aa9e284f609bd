"""Shared access to the real logs under ``tests/fixtures/logs/`` (each file's first line gives its source)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
H200_PROFILES = ("base_a", "base_b", "base_c", "combo2", "combo3", "overlap2", "pipe_all")


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def read_log() -> Callable[[str], str]:
    return lambda name: (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(params=H200_PROFILES)
def h200_log(request: pytest.FixtureRequest) -> str:
    return (FIXTURES / f"h200x2_fsdp_log_{request.param}.txt").read_text(encoding="utf-8")
