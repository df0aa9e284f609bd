"""Negative findings: what hurt, short enough to act on.

Named profiles are listed one by one (each is a hypothesis someone wrote down). Sampled configurations change
many settings at once, so listing each of them says little; instead a setting is reported as a pattern when every
sampled configuration that changed it hurt (at least :data:`MIN_PATTERN` of them), with the range of their Δ%
and their labels as evidence. Hurting sampled configurations no pattern covers are listed, the worst
:data:`MAX_LOOSE` of them, and the rest counted.
Patterns are correlations over configurations that change several settings at once: leads to test on their own,
not proofs.

Example:
    >>> h = Finding("s#1", "NCCL_PROTO=LL", ("NCCL_PROTO=LL",), -9.0, -11.0, -7.0, 1, "hurts", sampled=True)
    >>> negative_lines([h, h._replace(label="s#2", gain_pct=-12.0)], [])[0].startswith("**`NCCL_PROTO=LL`**")
    True
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

MIN_PATTERN = 3
MAX_PATTERNS = 3
MIN_GAP_PCT = 2.0
MAX_LOOSE = 5


class Finding(NamedTuple):
    """One scored configuration: its label, changed settings (text and tokens) and gain in percent."""

    label: str
    flags: str
    tokens: tuple[str, ...]
    gain_pct: float
    lo_pct: float
    hi_pct: float
    runs: int
    how: str  # "" when it does not hurt, else "hurts", "hurts (confirmed)", "probably hurts (...)"
    sampled: bool = False


def _line(f: Finding) -> str:
    flags = f"`{f.flags}`" if f.flags and not f.flags.startswith("(") else (f.flags or "(no change)")
    return f"**{f.label}** {flags} {f.how}: Δ {f.gain_pct:+.2f} % [{f.lo_pct:+.2f}, {f.hi_pct:+.2f}]"


def patterns(findings: list[Finding]) -> list[tuple[str, list[Finding], float]]:
    """Settings that hurt in every configuration changing them, with the mean Δ% of the configurations that do not
    change them; most discriminating first, at most :data:`MAX_PATTERNS`.

    Only settings at least :data:`MIN_PATTERN` sampled configurations changed qualify (named profiles count as
    evidence too), and only when their configurations average at least ``min_gap`` points below the others: in a
    study where most samples hurt, "all of them hurt" alone would single out nearly every value.
    """
    by_token: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        for token in f.tokens:
            by_token[token].append(f)
    found = []
    for token, fs in by_token.items():
        others = [f.gain_pct for f in findings if token not in f.tokens]
        if sum(f.sampled for f in fs) < MIN_PATTERN or not all(f.how for f in fs) or not others:
            continue
        mean_with, mean_without = sum(f.gain_pct for f in fs) / len(fs), sum(others) / len(others)
        if mean_with - mean_without <= -MIN_GAP_PCT:
            found.append((mean_with - mean_without, token, fs, mean_without))
    found.sort(key=lambda x: x[0])
    return [(token, fs, without) for _, token, fs, without in found[:MAX_PATTERNS]]


def negative_lines(findings: list[Finding], failures: list[str]) -> list[str]:
    """The markdown bullets (without the leading ``- ``): named profiles, sampled patterns, the rest, failures."""
    hurt = sorted((f for f in findings if f.how), key=lambda f: f.gain_pct)
    out = [_line(f) for f in hurt if not f.sampled]
    covered: set[str] = set()
    for token, fs, without in patterns(findings):
        gains = sorted(f.gain_pct for f in fs)
        confirmed = sum(1 for f in fs if f.hi_pct < 0)
        labels = ", ".join(f.label for f in sorted(fs, key=lambda f: f.gain_pct))
        out.append(f"**`{token}`** hurt in all {len(fs)} configurations that set it: Δ {gains[0]:+.2f} to "
                   f"{gains[-1]:+.2f} %, mean {sum(gains) / len(gains):+.2f} % against {without:+.2f} % for the "
                   f"configurations without it; {confirmed} of {len(fs)} with the whole interval below 0 ({labels})")
        covered.update(f.label for f in fs)
    loose = [f for f in hurt if f.sampled and f.label not in covered]
    out += [_line(f) for f in loose[:MAX_LOOSE]]
    if len(loose) > MAX_LOOSE:
        rest = loose[MAX_LOOSE:]
        out.append(f"{len(rest)} more sampled configurations hurt (Δ {rest[0].gain_pct:+.2f} to "
                   f"{rest[-1].gain_pct:+.2f} %): {', '.join(f.label for f in rest)}; their flags are in the "
                   "leaderboard and the appendix")
    return out + failures
