"""Constructed studies: baselines every ``k`` launches, a level that drifts, relative Gaussian run noise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace

import numpy as np
import pytest

from flagopt.stats import Run

Level = Callable[[float], float]


def linear_level(drift: float, horizon: float, base: float = 50_000.0) -> Level:
    """A baseline level that moves by ``drift`` (relative) over ``horizon`` launches."""
    return lambda t: base * (1.0 + drift * t / horizon)


def study(
    rng: np.random.Generator,
    level: Level,
    *,
    gain: float,
    noise: float,
    baseline_times: Sequence[float],
    arm_times: Sequence[float] = (),
) -> tuple[list[Run], list[Run]]:
    """Baseline runs and one arm's runs (true ``gain``) measured at the given launch times."""
    base = [Run(t=t, value=level(t) * (1.0 + noise * rng.standard_normal())) for t in baseline_times]
    arm = [Run(t=t, value=level(t) * (1.0 + gain) * (1.0 + noise * rng.standard_normal())) for t in arm_times]
    return base, arm


@pytest.fixture
def studies() -> SimpleNamespace:
    """The builders above, for tests (test folders are not packages, so they cannot import this module)."""
    return SimpleNamespace(study=study, linear_level=linear_level)
