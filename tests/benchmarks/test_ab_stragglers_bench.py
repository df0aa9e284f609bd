"""benchmarks/ab_stragglers.py: the rule flagopt ab applies, judged on simulated A/Bs of known noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.ab_stragglers import main, rates


def test_a_five_percent_straggler_is_found_at_low_noise_and_clean_ab_rarely_named() -> None:
    false, found = rates(np.random.default_rng(0), 0.003, 0.003, 5, 1, 400)
    assert false <= 0.02 and found >= 0.9
    # at 2 % run noise a 5 % slow run is within the noise: hardly ever named
    assert rates(np.random.default_rng(1), 0.02, 0.02, 5, 1, 400)[1] <= 0.1


def test_the_table_has_a_row_per_setting(tmp_path: Path) -> None:
    out = tmp_path / "t.md"
    assert main(["--trials", "20", "--out", str(out)]) == 0
    rows = out.read_text().splitlines()
    assert rows[0].startswith("| run sigma") and len(rows) == 2 + 4 * 3 * 3 * 2
