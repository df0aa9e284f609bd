from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def write_space(tmp_path: Path):
    def write(text: str, name: str = "space.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/studies/flagopt.db"
