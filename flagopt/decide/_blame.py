"""Learn from failures: which setting makes runs fail, so no run is spent on it again.

An engineer never tries a value again once it ran out of memory; a sampler that only sees "this point was
infeasible" keeps proposing the same value with other companions. A deterministic failure (out of memory, a
crash, NaN loss, a run that stops short) is blamed on a setting when

* a run that changed only that setting failed that way, or
* at least two runs that set it failed that way, no run that set it succeeded, and no earlier blame explains them.

A hang is retried as the infrastructure's; once the same configuration hangs twice and never ran, it is blamed like
an out-of-memory run. A value the installed XLA rejects (its run aborted on an unknown flag, or it was not run because
pre-flight or an earlier run found it) is blamed like one too: no run can ever measure it. Where XLA named the flag
itself unknown (not a value it could not parse), every value of the setting is blamed: an engineer who sees
"Unknown flag in XLA_FLAGS: --xla_x=80" does not try 88 and 96 next.

A numeric setting's blame extends beyond it, away from the deployed value (a threshold that runs out of memory at
64 GiB does at 128 GiB too), unless a run there succeeded. Flaky infrastructure (hangs, NCCL init, preemption) is
never blamed on a setting: those are retried instead.

Example:
    >>> b = Blame("ag", 2**36, "oom", failed=1, direction=1)
    >>> b.covers("ag", 2**37), b.covers("ag", 2**30)
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from flagopt.space import Space, render_value
from flagopt.decide._design import Scalar, flag_of, same_value, settings_of_record
from flagopt.decide._runs import CANCELLED, FAILED, INFEASIBLE, INVALID, RUNNING, RunRecord

#: Failure classes the configuration itself causes: the same settings fail the same way again.
DETERMINISTIC = frozenset({"oom", "crash", "numerics-nan", "incomplete"})
#: Failure classes retried as the infrastructure's, blamed on the configuration once they happen again on it.
REPRODUCIBLE = frozenset({"hang"})
#: A value the installed XLA rejects: its run aborts at start, or is not run at all (status ``invalid``) once
#: pre-flight or an earlier run found it unknown. No run can ever measure it.
REJECTED = frozenset({"unknown-flag"})


@dataclass(frozen=True)
class Blame:
    """One setting that makes runs fail.

    Attributes:
        param: the param's name (or ``target:key`` for a profile's own setting).
        value: the value that fails.
        failure_class: how it fails (``oom``...).
        failed: runs with this setting that failed that way.
        direction: for a numeric param, +1 when every larger value fails too, -1 for smaller ones, 0 for this
            value alone.
        every: every value of the setting fails (the installed XLA does not know the flag).
    """

    param: str
    value: Scalar
    failure_class: str
    failed: int
    direction: int = 0
    every: bool = False

    def covers(self, param: str, value: Scalar) -> bool:
        if param != self.param:
            return False
        if self.every:
            return True
        if self.direction and _is_number(value) and _is_number(self.value):
            return (float(value) - float(self.value)) * self.direction >= 0  # type: ignore[arg-type]
        return render_value(value) == render_value(self.value)

    def sentence(self) -> str:
        beyond = {1: " (and every larger value)", -1: " (and every smaller value)"}.get(self.direction, "")
        if self.every:
            return (f"the installed XLA rejects {self.param}={render_value(self.value)} (it does not know the flag: "
                    f"every value is left out): {self.failure_class}")
        if self.failure_class in REJECTED:  # its probe may never have run: pre-flight found it
            return f"the installed XLA rejects {self.param}={render_value(self.value)}{beyond}: unknown-flag"
        runs = "the run" if self.failed == 1 else f"all {self.failed} runs"
        return f"{runs} with {self.param}={render_value(self.value)}{beyond} failed: {self.failure_class}"

    def to_json(self) -> dict[str, object]:
        return {"param": self.param, "value": self.value, "failure_class": self.failure_class,
                "failed": self.failed, "direction": self.direction, "every": self.every, "sentence": self.sentence()}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def blamed_by(blames: Sequence[Blame], settings: Mapping[str, Scalar]) -> Blame | None:
    """The first blame that covers one of ``settings`` (param name -> value), or ``None``."""
    for name, value in settings.items():
        for blame in blames:
            if blame.covers(name, value):
                return blame
    return None


def excluded_by(blames: Sequence[Blame]) -> Callable[[str, Scalar], bool]:
    """Whether a value failed alone (one of ``blames`` covers it): it counts out of the space, as one no run can
    measure (rand-null-5035: an out-of-memory flag left 15 of the space's 31 configurations, the count of 31 was never
    reached, and the study ran to its budget and recommended a sampled point re-run past the last control, +2.1 %
    claimed, true +0.4 %).

    Example:
        >>> excluded_by([Blame("ag", 2**36, "oom", failed=1, direction=1)])("ag", 2**37)
        True
    """
    return lambda name, value: blamed_by(blames, {name: value}) is not None


def blame_failures(space: Space, records: Sequence[RunRecord], deployed: Mapping[str, str | None]) -> list[Blame]:
    """Every setting the study's deterministic failures are attributed to (see the module docstring)."""
    params = {p.name: p for p in space.params}
    ok_values: dict[str, list[Scalar]] = {}
    failures: list[tuple[str, dict[str, Scalar]]] = []
    reproducible: dict[tuple[str, str], list[dict[str, Scalar]]] = {}
    unknown: dict[str, tuple[Scalar, int]] = {}  # a setting whose flag XLA named unknown: a value it set, runs
    for rec in records:
        if rec.is_baseline or not rec.config_key:
            continue
        settings = {k: v for k, v in settings_of_record(space, rec.attrs.get("settings") or {}).items()
                    if k not in params or not same_value(params[k], v, deployed.get(k))}
        if rec.ok:
            for k, v in settings.items():
                ok_values.setdefault(k, []).append(v)
        elif rec.status in (INFEASIBLE, FAILED) and rec.attrs.get("failure_class") in DETERMINISTIC and settings:
            failures.append((str(rec.attrs["failure_class"]), settings))
        elif rec.status in (FAILED, INVALID) and rec.attrs.get("failure_class") in REJECTED and settings:
            failures.append((str(rec.attrs["failure_class"]), settings))
            named = set((rec.attrs.get("failure_details") or {}).get("flag_names") or ())
            for k, v in settings.items():
                if flag_of(space, k) in named:
                    first, count = unknown.get(k, (v, 0))
                    unknown[k] = (first, count + 1)
        elif rec.attrs.get("failure_class") in REPRODUCIBLE and settings and rec.status not in (CANCELLED, RUNNING):
            reproducible.setdefault((str(rec.attrs["failure_class"]), rec.config_key), []).append(settings)
    # A hang is the infrastructure's until it hangs again: once its retry hangs too (and the configuration never
    # ran), it is the configuration's, and each more try would cost a whole hang deadline of pinned nodes.
    ok_keys = {r.config_key for r in records if r.ok}
    for (failure_class, key), runs in reproducible.items():
        if len(runs) >= 2 and key not in ok_keys:
            failures.extend((failure_class, settings) for settings in runs)

    def direction(name: str, value: Scalar) -> int:
        param, dep = params.get(name), deployed.get(name)
        if param is None or param.choices is not None or not _is_number(value) or dep is None:
            return 0
        try:
            side = 1 if float(value) > float(dep) else -1  # type: ignore[arg-type]
        except ValueError:
            return 0
        # a larger (smaller) value that ran fine bounds the cliff: blame this value alone
        return 0 if any((float(v) - float(value)) * side > 0 for v in ok_values.get(name, ()) if _is_number(v)) \
            else side

    blames = [Blame(name, value, "unknown-flag", count, every=True) for name, (value, count) in unknown.items()]
    for failure_class, settings in failures:
        if len(settings) == 1:
            (name, value), = settings.items()
            if not any(b.covers(name, value) for b in blames):
                count = sum(1 for c, s in failures if c == failure_class and s.get(name) == value)
                blames.append(Blame(name, value, failure_class, count, direction(name, value)))
    counts: dict[tuple[str, str, str], int] = {}
    for failure_class, settings in failures:
        if blamed_by(blames, settings) is not None:
            continue  # already explained
        for name, value in settings.items():
            key = (failure_class, name, render_value(value))
            counts[key] = counts.get(key, 0) + 1
    for (failure_class, name, shown), count in sorted(counts.items(), key=lambda kv: -kv[1]):
        if count < 2:
            continue
        value = next(s[name] for c, s in failures if c == failure_class and name in s
                     and render_value(s[name]) == shown)
        if any(render_value(v) == render_value(value) for v in ok_values.get(name, ())):
            continue
        if not any(b.covers(name, value) for b in blames):
            blames.append(Blame(name, value, failure_class, count, direction(name, value)))
    return blames
