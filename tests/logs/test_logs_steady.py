"""steady_state: mean and spread over an inclusive window, and the errors of a window the run did not fill."""

from __future__ import annotations

import math
import statistics

import pytest

from flagopt.errors import FlagoptError
from flagopt.logs import MetricWindowError, StepSample, format_steps, steady_state


def _samples(values: dict[int, float]) -> list[StepSample]:
    return [StepSample(step, value, None, None) for step, value in values.items()]


def test_window_is_inclusive_and_ignores_warmup() -> None:
    samples = _samples({0: 5.0, 1: 90.0, 2: 100.0, 3: 104.0, 4: 96.0, 5: 1.0})
    steady = steady_state(samples, (2, 4))
    assert (steady.n, steady.values, steady.window) == (3, (100.0, 104.0, 96.0), (2, 4))
    assert steady.mean == 100.0
    assert steady.std == pytest.approx(4.0)  # sample std of 100, 104, 96
    assert steady.cv == pytest.approx(0.04)


def test_one_step_window_has_zero_spread() -> None:
    steady = steady_state(_samples({0: 1.0, 1: 7.0}), (1, 1))
    assert (steady.mean, steady.std, steady.n) == (7.0, 0.0, 1)


def test_unsorted_and_repeated_samples_count_once_in_step_order() -> None:
    samples = _samples({3: 30.0, 1: 10.0, 2: 20.0}) + _samples({2: 999.0})
    steady = steady_state(samples, (1, 3))
    assert steady.values == (10.0, 20.0, 30.0)
    assert steady.std == pytest.approx(statistics.stdev([10.0, 20.0, 30.0]))


def test_short_run_names_missing_steps_and_steps_seen() -> None:
    samples = _samples({i: 100.0 for i in range(8)})
    with pytest.raises(MetricWindowError) as err:
        steady_state(samples, (5, 14), source="trial_3/rank0.log")
    error = err.value
    assert error.missing == tuple(range(8, 15)) and error.seen == 8 and error.window == (5, 14)
    message = str(error)
    assert message.startswith("trial_3/rank0.log: window: steps 8-14 of the window 5-14")
    assert "8 steps with a value (0-7)" in message
    assert isinstance(error, FlagoptError) and isinstance(error, ValueError)


def test_empty_run_is_an_error_not_a_zero() -> None:
    with pytest.raises(MetricWindowError, match="no step with a metric value") as err:
        steady_state([], (0, 4))
    assert err.value.seen == 0 and err.value.missing == (0, 1, 2, 3, 4)


def test_gap_inside_the_window() -> None:
    with pytest.raises(MetricWindowError, match="steps 3 of the window 2-5") as err:
        steady_state(_samples({0: 1.0, 1: 1.0, 2: 1.0, 4: 1.0, 5: 1.0}), (2, 5))
    assert err.value.missing == (3,)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_inside_the_window_is_an_error(bad: float) -> None:
    with pytest.raises(MetricWindowError, match="nan or infinite") as err:
        steady_state(_samples({0: 1.0, 1: bad, 2: 1.0}), (0, 2))
    assert err.value.invalid == (1,)


def test_nan_outside_the_window_is_fine() -> None:
    steady = steady_state(_samples({0: math.nan, 1: 2.0, 2: 4.0}), (1, 2))
    assert steady.mean == 3.0


@pytest.mark.parametrize("window", [(5, 4), (-1, 3)])
def test_impossible_windows(window: tuple[int, int]) -> None:
    with pytest.raises(MetricWindowError, match="0 <= first <= last"):
        steady_state(_samples({0: 1.0}), window)


def test_format_steps_compacts_runs() -> None:
    assert format_steps([9, 1, 2, 3, 5, 6, 3]) == "1-3, 5-6, 9"
    assert format_steps([]) == ""
