from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


def space_writer(folder: Path):
    """A function that writes a space's YAML text (dedented) to ``folder`` under a name and returns its path."""
    def write(text: str, name: str = "space.yaml") -> Path:
        path = folder / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def write_space(tmp_path: Path):
    return space_writer(tmp_path)


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/studies/flagopt.db"
