"""From log text to :class:`StepSample` lists: pick the metric, derive it when needed, keep each step once."""

from __future__ import annotations

import math
from collections.abc import Iterable

from flagopt.logs._errors import LogParseError, MetricFieldError
from flagopt.logs._maxtext import StepLine, last_step_number, step_lines
from flagopt.logs._regex import compile_pattern, regex_step_lines
from flagopt.logs._sample import StepSample, keep_first

FORMATS = ("maxtext", "regex")
TOKENS_FIELD = "Tokens/s/device"
#: Older names of a metric: MaxText's 2023 ``TFLOP/s`` is the per-device number later printed as ``TFLOP/s/device``.
ALIASES = {"TFLOP/s/device": ("TFLOP/s",)}


def parse_steps(
    text: str,
    *,
    fmt: str = "maxtext",
    field: str = TOKENS_FIELD,
    pattern: str | None = None,
    tokens_per_step: float | None = None,
    source: str = "log",
) -> list[StepSample]:
    """Parse the step lines of a training log, first print of each step only, in print order.

    Args:
        text: the log (any mix of other lines is fine).
        fmt: ``"maxtext"`` (every MaxText step-line format, see :mod:`flagopt.logs._maxtext`) or ``"regex"``.
        field: the metric that becomes :attr:`StepSample.value` (``fmt="maxtext"``), as printed:
            ``Tokens/s/device`` (default), ``TFLOP/s/device``, ``seconds``...; case does not matter.
        pattern: for ``fmt="regex"``: a regex with named groups ``step`` and ``value`` (optional ``seconds``,
            ``loss``).
        tokens_per_step: tokens ONE device processes per step (``per_device_batch_size * max_target_length``
            for MaxText). Used only when the metric is ``Tokens/s/device`` and a line lacks it: then
            ``value = tokens_per_step / seconds``.
        source: what to name in error messages (e.g. the log's path).

    Returns:
        One sample per distinct step. A line without the metric (and no way to derive it) is left out, so a
        steady-state window over it reports the step as missing rather than using a made-up number.

    Raises:
        MetricFieldError: step lines exist but none carries ``field`` and it cannot be derived.
        PatternError: ``fmt="regex"`` with a missing or unusable pattern.
        LogParseError: an unknown ``fmt`` or a non-positive ``tokens_per_step``.

    Example:
        >>> log = "completed step: 0, seconds: 2.0, loss: nan\\ncompleted step: 1, seconds: 0.5, loss: 2.1\\n"
        >>> [(s.step, s.value) for s in parse_steps(log, tokens_per_step=1024)]
        [(0, 512.0), (1, 2048.0)]
    """
    if tokens_per_step is not None and not (math.isfinite(tokens_per_step) and tokens_per_step > 0):
        raise LogParseError(source, "tokens_per_step", f"must be a positive number of tokens per device, "
                            f"got {tokens_per_step!r}")
    if fmt == "maxtext":
        lines: Iterable[StepLine] = step_lines(text)
        metric = field
    elif fmt == "regex":
        lines = regex_step_lines(text, compile_pattern(pattern, source=source), source=source)
        metric = "value"
    else:
        raise LogParseError(source, "fmt", f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}")

    samples: list[StepSample] = []
    seen_keys: set[str] = set()
    any_line = False
    for line in lines:
        any_line = True
        seen_keys.update(line.fields)
        value = _metric(line.fields, metric, tokens_per_step)
        if value is None:
            continue
        samples.append(StepSample(line.step, value, line.fields.get("seconds"), line.fields.get("loss"),
                                  line.fields))
    if any_line and not samples:
        raise MetricFieldError(source, metric, _no_metric_reason(metric, seen_keys, tokens_per_step))
    return keep_first(samples)


def last_step(text: str, *, fmt: str = "maxtext", pattern: str | None = None) -> int | None:
    """The highest step printed so far, for "step k/N" progress while the log grows; ``None`` before any.

    A step line still being written (no newline yet) is not trusted for ``fmt="regex"``, nor is a bare step
    number at the end of the text for ``fmt="maxtext"``.

    Example:
        >>> last_step("completed step: 7, seconds: 1.0\\ncompleted step: 8, sec")
        8
    """
    if fmt == "maxtext":
        return last_step_number(text)
    if fmt != "regex":
        raise LogParseError("log", "fmt", f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not text.endswith(("\n", "\r")):
        text = text[: max(text.rfind("\n"), text.rfind("\r")) + 1]
    return max((line.step for line in regex_step_lines(text, compile_pattern(pattern))), default=None)


def _lookup(fields: dict[str, float], name: str) -> float | None:
    for key in (name, *ALIASES.get(name, ())):
        if key in fields:
            return fields[key]
    folded = name.casefold()
    for key, value in fields.items():
        if key.casefold() == folded:
            return value
    return None


def _metric(fields: dict[str, float], name: str, tokens_per_step: float | None) -> float | None:
    value = _lookup(fields, name)
    if value is not None:
        return value
    if name.casefold() == TOKENS_FIELD.casefold() and tokens_per_step is not None:
        seconds = _lookup(fields, "seconds")
        if seconds is not None and seconds > 0:
            return tokens_per_step / seconds
    return None


def _no_metric_reason(metric: str, seen: set[str], tokens_per_step: float | None) -> str:
    have = ", ".join(sorted(seen)) or "no numeric fields"
    reason = f"no step line carries {metric!r} (the lines have: {have}); choose one of those as the metric"
    if metric.casefold() == TOKENS_FIELD.casefold():
        if tokens_per_step is None and "seconds" in seen:
            reason += ", or give tokens_per_step (tokens per device per step) to derive it from 'seconds'"
        elif "seconds" not in seen:
            reason += "; it cannot be derived either, as the lines have no 'seconds'"
    return reason
