"""Negative findings: what hurt, short enough to act on.

Named profiles are listed one by one (each is a hypothesis someone wrote down). Sampled configurations change
many settings at once, so listing each of them says little; instead a setting is reported as a pattern when every
sampled configuration that changed it hurt (at least :data:`MIN_PATTERN` of them), with the range of their Δ%
and their labels as evidence. Hurting sampled configurations no pattern covers are listed, the worst
:data:`MAX_LOOSE` of them, and the rest counted.
Patterns are correlations over configurations that change several settings at once: leads to test on their own,
not proofs.

Only what the data show is listed: a configuration whose whole interval lies below zero (or whose verdict is
``worse``). One that merely estimates lower, inside the run-to-run noise, is not a finding; nor is one that sets
every setting to the value already in effect, XLA's own defaults included (the flag registry): it changed nothing.

Example:
    >>> h = Finding("s#1", "NCCL_PROTO=LL", ("NCCL_PROTO=LL",), -9.0, -11.0, -7.0, 1, "hurts", sampled=True)
    >>> ok = Finding("s#4", "NCCL_PROTO=Simple", ("NCCL_PROTO=Simple",), 1.0, -1.0, 3.0, 1, "", sampled=True)
    >>> hurt = [h, h._replace(label="s#2", gain_pct=-12.0), h._replace(label="s#3", gain_pct=-10.0)]
    >>> negative_lines([*hurt, ok], [])[0].startswith("**`NCCL_PROTO=LL`** hurt in all 3 configurations")
    True
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from flagopt.flags import FlagRegistry
from flagopt.report._diff import changed, changed_text
from flagopt.study import StudyData, settings_text

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


def _finding(data: StudyData, arm: Any, default_of: Any) -> Finding:
    est = arm.estimate
    settings = arm.first.attrs.get("settings")
    diff = changed(settings, data.space, default_of)
    if not any(diff.values()):
        how = ""  # every setting equals what runs today (XLA's default included): the probe changed nothing
    elif arm.verdict == "worse" or est.hi < 0:
        how = "hurts (confirmed)" if arm.verdict == "worse" else "hurts"
    else:
        how = ""  # an estimate below zero inside the noise is not evidence that it hurts
    tokens = tuple(settings_text({sec: {k: v}}) for sec, values in diff.items() for k, v in values.items())
    return Finding(arm.label, changed_text(settings, data.space), tokens, 100 * est.gain,
                   100 * est.lo, 100 * est.hi, arm.n, how, sampled=arm.kind == "sampled")


def negative_of(data: StudyData) -> tuple[str, ...]:
    """The report's negative findings: blamed settings, what hurt (:func:`negative_lines`), configurations that fail."""
    default_of = FlagRegistry.load().default
    findings = [_finding(data, a, default_of) for a in data.arms
                if a.estimate is not None and a.kind not in ("baseline-no-env", "baseline-deployed")]
    failures = [f"**{arm.label}** `{changed_text(arm.first.attrs.get('settings'), data.space)}` fails: "
                f"{arm.failures[-1].attrs.get('failure_class', arm.failures[-1].status)}"
                for arm in data.arms if arm.estimate is None and arm.failures
                # a cancelled run says nothing about its configuration (scancel, a stopped study)
                and arm.failures[-1].attrs.get("failure_class", arm.failures[-1].status) != "cancelled"]
    # settings the study learnt to avoid: every run with them failed the same way, so none was launched again
    blamed = [f"**`{', '.join(f'{m[0]}={m[1]}' for m in _members(b))}`**: {b['sentence']}; not tried "
              f"{'together ' if b.get('company') else ''}again" for b in data.attrs.get("flagopt.blames") or []]
    return tuple(blamed + negative_lines(findings, failures))


def _members(blame: dict) -> list[tuple[str, object]]:
    """A stored blame's settings: its own, then those it fails in company with (settings that fail only together)."""
    return [(blame["param"], blame["value"]), *((m["param"], m["value"]) for m in blame.get("company") or ())]
