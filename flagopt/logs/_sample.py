"""The per-step sample every log format is parsed into, and the number syntax the formats share."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

#: A printed number: ints, decimals, exponents (``lr: 1.000e-04``), and Python's ``nan`` / ``inf``.
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"


@dataclass(frozen=True)
class StepSample:
    """One training step as the log reported it.

    Attributes:
        step: the step number as printed.
        value: the chosen metric (e.g. ``Tokens/s/device``), possibly derived from ``seconds``.
        seconds: the step's wall time, when printed.
        loss: the loss, when printed (``nan`` is kept: a diverged run still has a throughput).
        fields: every numeric field on the line, keyed as printed (read-only).

    Example:
        >>> s = StepSample(3, 50574.62, 0.324, float("nan"), {"seconds": 0.324})
        >>> s.fields["seconds"], s.has_finite_value
        (0.324, True)
    """

    step: int
    value: float
    seconds: float | None
    loss: float | None
    fields: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # A read-only view, so a frozen sample cannot be changed through its dict either.
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    @property
    def has_finite_value(self) -> bool:
        """Whether ``value`` is a usable number (not nan or infinite)."""
        return math.isfinite(self.value)


def keep_first(samples: list[StepSample]) -> list[StepSample]:
    """Drop later repeats of a step (multi-host logs print each step once per host); keep print order."""
    seen: set[int] = set()
    kept: list[StepSample] = []
    for sample in samples:
        if sample.step not in seen:
            seen.add(sample.step)
            kept.append(sample)
    return kept
