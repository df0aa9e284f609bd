from __future__ import annotations

from pathlib import Path

import pytest

HLO = Path(__file__).resolve().parents[1] / "fixtures" / "hlo"
H200 = HLO / "h200x2_fsdp" / "step_after_optimizations.txt"
MISC = HLO / "evidence_misc"


@pytest.fixture(scope="session")
def h200_text() -> str:
    return H200.read_text()
