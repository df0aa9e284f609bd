"""The errors a log can cause: a metric the lines do not carry, a bad pattern, a short window."""

from __future__ import annotations

from flagopt.errors import EXIT_FAILURE, FlagoptError


class LogParseError(FlagoptError, ValueError):
    """Base of the log errors; a :class:`ValueError` too, so plain callers can catch it without flagopt types."""


class MetricFieldError(LogParseError):
    """The chosen metric is on no step line and cannot be derived (say which fields the lines do have)."""


class PatternError(LogParseError):
    """A ``fmt="regex"`` pattern that does not compile or lacks the named groups ``step`` and ``value``."""


class MetricWindowError(LogParseError):
    """The steady-state window is not fully covered by finite values.

    Attributes:
        window: the inclusive ``(first, last)`` steps asked for.
        missing: window steps with no sample.
        invalid: window steps whose value is nan or infinite.
        seen: how many distinct steps the samples held in all.
    """

    exit_code = EXIT_FAILURE

    def __init__(
        self,
        source: str,
        window: tuple[int, int],
        reason: str,
        *,
        missing: tuple[int, ...] = (),
        invalid: tuple[int, ...] = (),
        seen: int = 0,
    ) -> None:
        self.window = window
        self.missing = missing
        self.invalid = invalid
        self.seen = seen
        super().__init__(source, "window", reason)
