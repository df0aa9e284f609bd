"""Step lines of any other workload, read with a user's regular expression.

The pattern needs the named groups ``step`` and ``value``; the optional groups ``seconds`` and ``loss`` fill
those attributes, and every named group that holds a number lands in :attr:`StepSample.fields`.

Example:
    >>> lines = list(regex_step_lines("it 3 | 812.5 tok/s", r"it (?P<step>\\d+) \\| (?P<value>[\\d.]+) tok/s"))
    >>> lines[0].step, lines[0].fields["value"]
    (3, 812.5)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from flagopt.logs._errors import PatternError
from flagopt.logs._maxtext import StepLine

REQUIRED_GROUPS = ("step", "value")


def compile_pattern(pattern: str | None, *, source: str = "pattern") -> re.Pattern[str]:
    """Compile and check a step pattern; raise :class:`PatternError` saying what to fix."""
    if not pattern:
        raise PatternError(source, "pattern", 'fmt "regex" needs a pattern with named groups (?P<step>...) and '
                           "(?P<value>...)")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise PatternError(source, "pattern", f"{pattern!r} is not a valid regular expression: {exc}") from exc
    missing = [name for name in REQUIRED_GROUPS if name not in compiled.groupindex]
    if missing:
        groups = ", ".join(f"(?P<{name}>...)" for name in missing)
        raise PatternError(source, "pattern", f"{pattern!r} lacks the named group(s) {groups}; add them")
    return compiled


def regex_step_lines(text: str, pattern: str | re.Pattern[str], *, source: str = "log") -> Iterator[StepLine]:
    """Every line matching ``pattern``, in order, repeats included; ``value`` is under ``fields["value"]``."""
    compiled = pattern if isinstance(pattern, re.Pattern) else compile_pattern(pattern)
    for lineno, line in enumerate(text.splitlines(), start=1):
        match = compiled.search(line)
        if match is None or match.group("step") is None:
            continue
        try:
            step = int(match.group("step"))
        except ValueError as exc:
            raise PatternError(source, "pattern", f"line {lineno}: group 'step' matched {match.group('step')!r}, "
                               "not an integer; narrow the group, e.g. (?P<step>\\d+)") from exc
        fields: dict[str, float] = {}
        for name, text_value in match.groupdict().items():
            if text_value is None or name == "step":
                continue
            try:
                fields[name] = float(text_value)
            except ValueError as exc:
                if name == "value":
                    raise PatternError(source, "pattern", f"line {lineno}: group 'value' matched {text_value!r}, "
                                       "not a number; narrow the group, e.g. (?P<value>[\\d.]+)") from exc
        yield StepLine(step, fields, lineno)
