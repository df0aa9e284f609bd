"""Training-log parsing: per-step metric samples, the steady-state window, and what the run says about itself.

Pure functions on text: no files, no processes, no optuna.

Example:
    >>> from flagopt.logs import parse_steps, steady_state
    >>> log = "\\n".join(f"completed step: {i}, seconds: 0.5, Tokens/s/device: {1000 + i}, loss: nan" for i in range(6))
    >>> samples = parse_steps(log)
    >>> steady_state(samples, (2, 5)).mean
    1003.5
"""

from __future__ import annotations

from flagopt.logs._errors import LogParseError, MetricFieldError, MetricWindowError, PatternError
from flagopt.logs._info import InfoPattern, load_info_patterns, run_info, tokens_per_device_step
from flagopt.logs._parse import FORMATS, TOKENS_FIELD, last_step, parse_steps
from flagopt.logs._sample import StepSample
from flagopt.logs._steady import SteadyState, format_steps, steady_state

__all__ = [
    "FORMATS",
    "TOKENS_FIELD",
    "InfoPattern",
    "LogParseError",
    "MetricFieldError",
    "MetricWindowError",
    "PatternError",
    "SteadyState",
    "StepSample",
    "format_steps",
    "last_step",
    "load_info_patterns",
    "parse_steps",
    "run_info",
    "steady_state",
    "tokens_per_device_step",
]
