"""The MaxText venv the `maxtext` tests drive (made by scripts/maxtext_env.sh; `bash .ci/run` makes it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAXTEXT_VENV = REPO / os.environ.get("FLAGOPT_MAXTEXT_VENV", ".venv-maxtext")
MAXTEXT_PYTHON = MAXTEXT_VENV / "bin" / "python"


@pytest.fixture(scope="session")
def maxtext_python() -> Path:
    """The interpreter that has MaxText 0.2.5; the test is skipped, saying how to get it, when there is none."""
    if not MAXTEXT_PYTHON.exists():
        pytest.skip(f"needs MaxText in {MAXTEXT_VENV} (Python 3.12): run `bash scripts/maxtext_env.sh` "
                    "(`bash .ci/run` does, as CI does)")
    return MAXTEXT_PYTHON
