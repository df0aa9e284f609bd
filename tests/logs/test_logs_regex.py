"""fmt="regex": a user's pattern with named groups step and value."""

from __future__ import annotations

import math

import pytest

from flagopt.logs import PatternError, last_step, parse_steps, steady_state

LOG = """\
[rank0] warmup...
[rank0] iter 1 | 812.5 tok/s | 0.250 s | loss 3.5
[rank1] iter 1 | 800.0 tok/s | 0.260 s | loss 3.5
[rank0] iter 2 | 820.0 tok/s | 0.245 s | loss nan
[rank0] iter 3 | 830.0 tok/s | 0.240 s | loss 3.1
"""
PATTERN = r"iter (?P<step>\d+) \| (?P<value>[\d.]+) tok/s \| (?P<seconds>[\d.]+) s \| loss (?P<loss>\S+)"


def test_regex_format_reads_step_value_seconds_and_loss() -> None:
    samples = parse_steps(LOG, fmt="regex", pattern=PATTERN)
    assert [(s.step, s.value, s.seconds) for s in samples] == [(1, 812.5, 0.25), (2, 820.0, 0.245), (3, 830.0, 0.24)]
    assert samples[0].loss == 3.5 and samples[1].loss is not None and math.isnan(samples[1].loss)
    assert set(samples[0].fields) == {"value", "seconds", "loss"}
    assert steady_state(samples, (2, 3)).mean == 825.0


def test_regex_with_only_the_required_groups() -> None:
    (sample,) = parse_steps("step=4 thr=1.5e3\n", fmt="regex", pattern=r"step=(?P<step>\d+) thr=(?P<value>\S+)")
    assert (sample.step, sample.value, sample.seconds, sample.loss) == (4, 1500.0, None, None)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (None, "needs a pattern"),
        ("", "needs a pattern"),
        (r"iter (?P<step>\d+", "not a valid regular expression"),
        (r"iter (\d+) (?P<value>[\d.]+)", r"\(\?P<step>\.\.\.\)"),
        (r"iter (?P<step>\d+) ([\d.]+)", r"\(\?P<value>\.\.\.\)"),
    ],
)
def test_bad_patterns_say_what_to_fix(pattern: str | None, message: str) -> None:
    with pytest.raises(PatternError, match=message):
        parse_steps(LOG, fmt="regex", pattern=pattern)


def test_a_group_that_captures_text_is_reported_with_its_line() -> None:
    with pytest.raises(PatternError, match=r"line 2: group 'value' matched '812.5 tok/s'"):
        parse_steps(LOG, fmt="regex", pattern=r"iter (?P<step>\d+) \| (?P<value>[^|]+?) \|")
    with pytest.raises(PatternError, match=r"line 2: group 'step' matched '1 \|'"):
        parse_steps(LOG, fmt="regex", pattern=r"iter (?P<step>\d+ \|) (?P<value>[\d.]+)")


def test_last_step_for_regex_ignores_a_line_still_being_written() -> None:
    growing = LOG + "[rank0] iter 4 | 83"
    assert last_step(growing, fmt="regex", pattern=r"iter (?P<step>\d+) \| (?P<value>[\d.]+)") == 3
    assert last_step(growing + "5.0 tok/s\n", fmt="regex", pattern=r"iter (?P<step>\d+) \| (?P<value>[\d.]+)") == 4
