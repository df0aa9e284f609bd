"""The steady-state throughput of a run: mean and spread over a fixed window of steps.

Warm-up steps (compilation, first checkpoint, profiler start) stay in the samples but never in the statistics,
and a window that the run did not fully reach is an error, never a smaller or zero mean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from flagopt.logs._errors import MetricWindowError
from flagopt.logs._sample import StepSample


@dataclass(frozen=True)
class SteadyState:
    """Mean and spread of the metric over an inclusive window of steps.

    Attributes:
        mean: the mean value over the window.
        std: the sample standard deviation (n - 1) of the per-step values; 0.0 for a one-step window.
        n: the number of steps (``window[1] - window[0] + 1``).
        values: the per-step values in step order.
        window: the inclusive ``(first, last)`` steps.
    """

    mean: float
    std: float
    n: int
    values: tuple[float, ...]
    window: tuple[int, int]

    @property
    def cv(self) -> float:
        """The coefficient of variation ``std / mean`` (0.0 when the mean is 0)."""
        return self.std / self.mean if self.mean else 0.0


def steady_state(
    samples: Sequence[StepSample], window: tuple[int, int], *, source: str = "log"
) -> SteadyState:
    """Mean and spread of ``samples`` over the inclusive step ``window``.

    Args:
        samples: parsed steps (from :func:`flagopt.logs.parse_steps`); a repeated step counts once (the first).
        window: ``(first, last)`` steps, both included, ``0 <= first <= last``.
        source: what to name in error messages (e.g. the log's path).

    Raises:
        MetricWindowError: a window step has no sample, or its value is nan or infinite; the message names those
            steps and how many steps the log had.

    Example:
        >>> s = [StepSample(i, v, None, None) for i, v in enumerate([9.0, 100.0, 102.0, 98.0])]
        >>> steady_state(s, (1, 3)).mean
        100.0
    """
    first, last = _check_window(window, source)
    by_step: dict[int, StepSample] = {}
    for sample in samples:
        by_step.setdefault(sample.step, sample)
    wanted = range(first, last + 1)
    missing = tuple(step for step in wanted if step not in by_step)
    if missing:
        raise MetricWindowError(
            source, (first, last),
            f"steps {format_steps(missing)} of the window {first}-{last} have no metric value; {_seen(by_step)}. "
            "Run more steps, or move the window inside the steps the run prints",
            missing=missing, seen=len(by_step),
        )
    values = tuple(by_step[step].value for step in wanted)
    invalid = tuple(step for step, value in zip(wanted, values) if not math.isfinite(value))
    if invalid:
        raise MetricWindowError(
            source, (first, last),
            f"steps {format_steps(invalid)} of the window {first}-{last} have a nan or infinite metric value; "
            "the run measured no usable throughput there",
            invalid=invalid, seen=len(by_step),
        )
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return SteadyState(math.fsum(values) / len(values), std, len(values), values, (first, last))


def format_steps(steps: Sequence[int]) -> str:
    """Sorted step numbers as compact ranges.

    Example:
        >>> format_steps([3, 4, 5, 9, 11, 12])
        '3-5, 9, 11-12'
    """
    runs: list[list[int]] = []
    for step in sorted(set(steps)):
        if runs and step == runs[-1][1] + 1:
            runs[-1][1] = step
        else:
            runs.append([step, step])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def _check_window(window: tuple[int, int], source: str) -> tuple[int, int]:
    try:
        first, last = (int(window[0]), int(window[1]))
    except (TypeError, ValueError, IndexError) as exc:
        raise MetricWindowError(source, (0, 0), f"{window!r} is not a (first, last) pair of steps") from exc
    if not 0 <= first <= last:
        raise MetricWindowError(source, (first, last), f"window {first}-{last} must satisfy 0 <= first <= last")
    return first, last


def _seen(by_step: dict[int, StepSample]) -> str:
    if not by_step:
        return "the log has no step with a metric value"
    return f"the log has {len(by_step)} steps with a value ({format_steps(list(by_step))})"
