"""The pipeline bubble arithmetic."""

from __future__ import annotations

import pytest

from flagopt.errors import FlagoptError
from flagopt.evidence import bubble_fraction, bubble_table


def test_bubble_fraction_formula_and_limits() -> None:
    assert bubble_fraction(1, 8) == 0.0  # one stage never idles
    assert bubble_fraction(4, 4) == pytest.approx(3 / 7)  # the pp fixture: while trip count 4 + 4 - 1 = 7
    assert bubble_fraction(4, 4, virtual=2) == pytest.approx(3 / 11)
    assert bubble_fraction(8, 1000) < 0.01
    with pytest.raises(FlagoptError):
        bubble_fraction(0, 4)


def test_table_predicts_gain_vs_the_reference_and_the_explained_share() -> None:
    rows = bubble_table(4, [4, 8, 16], {8: 0.30, 16: 0.0})
    assert [r.microbatches for r in rows] == [4, 8, 16]
    ref, m8, m16 = rows
    assert ref.predicted_gain == 0.0 and ref.explained is None
    # step time ~ 1 / (1 - bubble): (1 - 3/11) / (1 - 3/7) - 1 = (8/11) / (4/7) - 1 = 14/11 - 1
    assert m8.predicted_gain == pytest.approx(14 / 11 - 1)
    assert m8.explained == pytest.approx((14 / 11 - 1) / 0.30)
    assert m16.measured_gain == 0.0 and m16.explained is None  # nothing measured to explain
    assert m16.predicted_gain > m8.predicted_gain


def test_table_reference_and_missing_measurements() -> None:
    rows = bubble_table(2, [2, 4], None, reference=4)
    assert rows[1].predicted_gain == 0.0 and rows[0].predicted_gain < 0
    assert all(r.measured_gain is None and r.explained is None for r in rows)
    assert bubble_table(2, []) == []
    with pytest.raises(FlagoptError, match="reference"):
        bubble_table(2, [2, 4], reference=3)
