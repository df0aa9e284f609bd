"""Read XLA's fatal flag-parsing messages: which flags (or values) a job was killed for.

Formats handled (all real, see ``tests/fixtures/failures/unknown_xla_flags_messages_by_jaxlib.log``):

* ``F1121 23:22:37.115195   20305 parse_flags_from_env.cc:234] Unknown flags in XLA_FLAGS: --a=1 --b=2``
  (absl prefix, jaxlib >= 0.7), and the glog prefix ``2024-05-09 10:00:00.000000: F external/xla/...]`` before;
* ``Unknown flag in XLA_FLAGS: --a=1`` (singular when one flag is unknown);
* jaxlib <= 0.5.x repeats stale, *known* flags after a double space: only the text before it is reliable;
* any variable name (``XLA_FLAGS``, ``TF_XLA_FLAGS``, ``LIBTPU_INIT_ARGS``), and typed look-alike dashes
  (``-–flag``, an en-dash) which make a flag unknown;
* bad values, which abort before the unknown-flag check:
  ``Couldn't interpret value maybe for flag xla_x.`` / ``Illegal value for --xla_x 'BOGUS'`` /
  ``Check failed: tsl::Flags::Parse(...) Flag parsing failed.`` (an enum value names no flag at all).

Example:
    >>> r = parse_flag_rejection("F1121 23:22:37.1   1 p.cc:234] Unknown flag in XLA_FLAGS: --xla_x=1")
    >>> r.flags, r.names, r.env_var
    (('--xla_x=1',), ('xla_x',), 'XLA_FLAGS')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flagopt.flags._registry import flag_name

_UNKNOWN = re.compile(r"Unknown flags? in (?P<var>[A-Za-z_][A-Za-z0-9_]*): ?(?P<rest>[^\n]*)")
_BAD_VALUE = (
    re.compile(r"Couldn't interpret value (?P<value>.*) for flag (?P<name>\w+)"),
    re.compile(r"Illegal value for --(?P<name>\w+) '(?P<value>.*)'"),
)
_PARSE_FAILED = re.compile(r"Flag parsing failed")
_ODD_DASHES = "\u2013\u2014\u2212"  # en dash, em dash, minus sign: what word processors and chats turn "--" into


@dataclass(frozen=True)
class FlagRejection:
    """What XLA refused when it parsed a flags variable.

    Attributes:
        env_var: the variable, e.g. ``XLA_FLAGS`` or ``LIBTPU_INIT_ARGS`` (empty when the message names none).
        flags: the rejected tokens as printed (only the reliable part of the message).
        names: their bare flag names.
        bad_values: ``(name, value)`` pairs XLA could not interpret.
        typos: tokens written with a look-alike dash instead of ``--``.
        lines: the log lines this was read from.
    """

    env_var: str
    flags: tuple[str, ...]
    names: tuple[str, ...]
    bad_values: tuple[tuple[str, str], ...]
    typos: tuple[str, ...]
    lines: tuple[str, ...]


def reliable_flag_text(rest: str) -> str:
    """The part of an unknown-flags list to trust: jaxlib <= 0.5.x appends stale flags after a double space."""
    return rest.split("  ", 1)[0].strip()


def parse_flag_rejection(text: str) -> FlagRejection | None:
    """Find XLA's flag-parsing fatal messages in ``text``; ``None`` when there are none."""
    env_var = ""
    flags: list[str] = []
    bad: list[tuple[str, str]] = []
    lines: list[str] = []
    parse_failed = False
    for line in text.splitlines():
        match = _UNKNOWN.search(line)
        if match:
            env_var = env_var or match["var"]
            flags += [tok for tok in reliable_flag_text(match["rest"]).split() if tok not in flags]
            lines.append(line)
            continue
        for pattern in _BAD_VALUE:
            value_match = pattern.search(line)
            if value_match:
                bad.append((value_match["name"], value_match["value"]))
                lines.append(line)
                break
        else:
            if _PARSE_FAILED.search(line):
                parse_failed = True
                lines.append(line)
    if not (flags or bad or parse_failed):
        return None
    return FlagRejection(
        env_var=env_var,
        flags=tuple(flags),
        names=tuple(flag_name(tok) for tok in flags),
        bad_values=tuple(bad),
        typos=tuple(tok for tok in flags if any(ch in tok[:3] for ch in _ODD_DASHES)),
        lines=tuple(lines),
    )
