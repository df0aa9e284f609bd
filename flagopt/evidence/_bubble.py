"""The pipeline bubble model: how much of a microbatch-count effect idle pipeline stages explain.

With ``s`` stages, ``m`` microbatches and ``v`` virtual stages per device, a GPipe/1F1B schedule idles for
``(s - 1) / (m * v + s - 1)`` of the step. At a fixed global batch the work is the same, so a step takes time
proportional to ``1 / (1 - bubble)``.

Example:
    >>> round(bubble_fraction(4, 4), 3), round(bubble_fraction(4, 16), 3)
    (0.429, 0.158)
    >>> row = bubble_table(4, [4, 16], {16: 0.40})[1]
    >>> round(row.predicted_gain, 3), round(row.explained, 2)
    (0.474, 1.18)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flagopt.errors import FlagoptError


def bubble_fraction(stages: int, microbatches: int, virtual: int = 1) -> float:
    """The idle fraction of a pipelined step: ``(stages-1) / (microbatches*virtual + stages-1)``."""
    if stages < 1 or microbatches < 1 or virtual < 1:
        raise FlagoptError("bubble model", None, "stages, microbatches and virtual must all be >= 1")
    return (stages - 1) / (microbatches * virtual + stages - 1)


@dataclass(frozen=True)
class BubbleRow:
    """One microbatch setting: the bubble, the speed-up the model predicts, and what was measured."""

    microbatches: int
    bubble: float
    predicted_gain: float  # relative to the reference setting: 0.10 = 10 % faster
    measured_gain: float | None
    explained: float | None  # predicted / measured: the share of the measured effect the bubble accounts for

    def to_dict(self) -> dict[str, float | int | None]:
        return dict(self.__dict__)


def bubble_table(
    stages: int,
    microbatch_settings: Sequence[int],
    measured_gains: Mapping[int, float] | None = None,
    *,
    virtual: int = 1,
    reference: int | None = None,
) -> list[BubbleRow]:
    """One row per microbatch setting, gains relative to ``reference`` (default: the first setting).

    Args:
        stages: pipeline stages.
        microbatch_settings: the microbatch counts tried.
        measured_gains: measured relative gain per setting vs the same reference (0.05 = +5 %).
        virtual: virtual stages per device (interleaved schedules).
        reference: the setting gains are relative to; must be one of ``microbatch_settings``.
    """
    if not microbatch_settings:
        return []
    ref = microbatch_settings[0] if reference is None else reference
    if ref not in microbatch_settings:
        raise FlagoptError("bubble model", "reference", f"{ref} is not one of the settings {list(microbatch_settings)}")
    ref_busy = 1 - bubble_fraction(stages, ref, virtual)
    rows = []
    for m in microbatch_settings:
        bubble = bubble_fraction(stages, m, virtual)
        predicted = (1 - bubble) / ref_busy - 1
        measured = None if measured_gains is None else measured_gains.get(m)
        explained = predicted / measured if measured not in (None, 0.0) and m != ref else None
        rows.append(BubbleRow(m, bubble, predicted, measured, explained))
    return rows
