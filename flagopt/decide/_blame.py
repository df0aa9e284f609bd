"""Learn from failures: which setting makes runs fail, so no run is spent on it again.

An engineer never tries a value again once it ran out of memory; a sampler that only sees "this point was
infeasible" keeps proposing the same value with other companions. A deterministic failure (out of memory, a
crash, NaN loss, a run that stops short) is blamed on a setting when

* a run that changed only that setting failed that way, or
* at least two runs that set it failed that way, no run that set it succeeded, and no earlier blame explains them.

A hang is retried as the infrastructure's; once the same configuration hangs twice and never ran, it is blamed like
an out-of-memory run, unless the study's other launches hang about as often (:func:`hangs_beyond_the_cluster`). A
value the installed XLA rejects (its run aborted on an unknown flag, or it was not run because pre-flight or an
earlier run found it) is blamed like one too: no run can ever measure it. Where XLA named the flag
itself unknown (not a value it could not parse), every value of the setting is blamed: an engineer who sees
"Unknown flag in XLA_FLAGS: --xla_x=80" does not try 88 and 96 next.

Settings that each run fine alone and fail together (a pipelined all-gather with a 4 GiB combine threshold runs out
of memory; either alone does not) are blamed together: no run sets all of them again, and the smallest failing set
found wins (a combination fails, then its drop-one variant without a third setting: the pair is the culprit).

A numeric setting's blame extends beyond it, away from the deployed value (a threshold that runs out of memory at
64 GiB does at 128 GiB too), or where the space does not state that value, toward the side its failures alone lie
on, unless a run there succeeded. Flaky infrastructure (hangs, NCCL init, preemption) is
never blamed on a setting: those are retried instead.

Example:
    >>> b = Blame("ag", 2**36, "oom", failed=1, direction=1)
    >>> b.covers("ag", 2**37), b.covers("ag", 2**30)
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flagopt.space import Space, render_value
from flagopt.decide._design import Scalar, flag_of, is_number, same_value, settings_of_record
from flagopt.decide._hangs import hangs_beyond_the_cluster
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
        company: the other settings it fails with, each ``(param, value, direction)``: the run fails only when all
            of them are set (each ran fine alone); empty for a setting that fails alone.
    """

    param: str
    value: Scalar
    failure_class: str
    failed: int
    direction: int = 0
    every: bool = False
    company: tuple[tuple[str, Scalar, int], ...] = ()

    def covers(self, param: str, value: Scalar) -> bool:
        """Whether ``param=value`` fails whatever else is set (never for a blame in company)."""
        if param != self.param or self.company:
            return False
        return self.every or _beyond(value, self.value, self.direction)

    def covers_all(self, settings: Mapping[str, Scalar]) -> bool:
        """Whether ``settings`` set every one of the blame's settings (its company's too)."""
        return all(name in settings and _beyond(settings[name], value, direction)
                   for name, value, direction in self.members())

    def members(self) -> tuple[tuple[str, Scalar, int], ...]:
        return ((self.param, self.value, self.direction), *self.company)

    def sentence(self) -> str:
        runs = "the run" if self.failed == 1 else f"all {self.failed} runs"
        if self.company:
            together = " together with ".join(f"{name}={render_value(value)}{_BEYOND.get(direction, '')}"
                                               for name, value, direction in self.members())
            return f"{runs} with {together} failed: {self.failure_class} (each runs alone; not together)"
        beyond = _BEYOND.get(self.direction, "")
        if self.every:
            return (f"the installed XLA rejects {self.param}={render_value(self.value)} (it does not know the flag: "
                    f"every value is left out): {self.failure_class}")
        if self.failure_class in REJECTED:  # its probe may never have run: pre-flight found it
            return f"the installed XLA rejects {self.param}={render_value(self.value)}{beyond}: unknown-flag"
        return f"{runs} with {self.param}={render_value(self.value)}{beyond} failed: {self.failure_class}"

    def to_json(self) -> dict[str, object]:
        return {"param": self.param, "value": self.value, "failure_class": self.failure_class,
                "failed": self.failed, "direction": self.direction, "every": self.every,
                "company": [{"param": n, "value": v, "direction": d} for n, v, d in self.company],
                "sentence": self.sentence()}


_BEYOND = {1: " (and every larger value)", -1: " (and every smaller value)"}


def _beyond(value: Scalar, blamed: Scalar, direction: int) -> bool:
    """Whether ``value`` is the blamed value, or past it in ``direction`` (a numeric blame's extension)."""
    if direction and is_number(value) and is_number(blamed):
        return (float(value) - float(blamed)) * direction >= 0  # type: ignore[arg-type]
    return render_value(value) == render_value(blamed)


def blamed_by(blames: Sequence[Blame], settings: Mapping[str, Scalar]) -> Blame | None:
    """The first blame that covers one of ``settings`` (param name -> value), else the first whose settings in
    company ``settings`` all set, or ``None``.

    Example:
        >>> pair = Blame("ag", 2**32, "oom", failed=1, direction=1, company=(("pipe", True, 0),))
        >>> blamed_by([pair], {"ag": 2**33}) is None, blamed_by([pair], {"ag": 2**33, "pipe": True}) is pair
        (True, True)
    """
    for name, value in settings.items():
        for blame in blames:
            if blame.covers(name, value):
                return blame
    return next((b for b in blames if b.company and b.covers_all(settings)), None)


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
    ok_settings: list[dict[str, Scalar]] = []
    failures: list[tuple[str, dict[str, Scalar]]] = []
    reproducible: dict[tuple[str, str], list[dict[str, Scalar]]] = {}
    unknown: dict[str, tuple[Scalar, int]] = {}  # a setting whose flag XLA named unknown: a value it set, runs
    for rec in records:
        if rec.is_baseline or not rec.config_key:
            continue
        settings = {k: v for k, v in settings_of_record(space, rec.attrs.get("settings") or {}).items()
                    if k not in params or not same_value(params[k], v, deployed.get(k))}
        if rec.ok:
            ok_settings.append(settings)
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
        if len(runs) >= 2 and key not in ok_keys and hangs_beyond_the_cluster(records, failure_class, key):
            failures.extend((failure_class, settings) for settings in runs)

    unstated = _unstated_sides(params, failures, ok_values, deployed)

    def direction(name: str, value: Scalar) -> int:
        side = _side(params.get(name), value, deployed.get(name), unstated.get(name, 0))
        if not side:
            return 0
        # a larger (smaller) value that ran fine bounds the cliff: blame this value alone
        return 0 if any((float(v) - float(value)) * side > 0 for v in ok_values.get(name, ()) if is_number(v)) \
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
    return blames + _in_company(failures, blames, ok_settings, params, deployed, unstated)


def _in_company(failures: Sequence[tuple[str, dict[str, Scalar]]], blames: Sequence[Blame],
                ok_settings: Sequence[dict[str, Scalar]], params: Mapping[str, Any],
                deployed: Mapping[str, str | None], unstated: Mapping[str, int]) -> list[Blame]:
    """Blames in company: each failure of two settings or more that no blame explains, smallest first (a pair that
    failed explains the combination of three that failed before it). A numeric setting's blame extends away from
    the deployed value, as alone, unless a run with the same company past it ran fine; none is drawn that a run
    which ran fine contradicts. Blamed one setting at a time, a threshold and a pipelining flag that run out of memory
    only together were never blamed (stress-combo-oom: 9 launches a study failed for a reason an earlier one showed)."""
    out: list[Blame] = []
    for failure_class, settings in sorted(failures, key=lambda f: len(f[1])):
        if len(settings) < 2 or failure_class in REJECTED or blamed_by([*blames, *out], settings) is not None:
            continue
        members = []
        for name, value in sorted(settings.items()):
            side = _side(params.get(name), value, deployed.get(name), unstated.get(name, 0))
            rest = {k: v for k, v in settings.items() if k != name}
            if side and any(all(ok.get(k) == v for k, v in rest.items()) and is_number(ok.get(name))
                            and (float(ok[name]) - float(value)) * side > 0 for ok in ok_settings):  # type: ignore
                side = 0  # past it, in the same company, a run ran fine
            members.append((name, value, side))
        count = sum(1 for c, s in failures if c == failure_class and s == settings)
        for kept in (*_same_company(members, [*blames, *out]), members):
            (name, value, side), *company = kept
            blame = Blame(name, value, failure_class, count, side, company=tuple(company))
            if not any(blame.covers_all(ok) for ok in ok_settings):
                out.append(blame)
                break
    return out


Member = tuple[str, Scalar, int]


def _same_company(members: Sequence[Member], blames: Sequence[Blame]) -> list[list[Member]]:
    """The members of a new failure that an earlier blame in company names, where they differ from it only in a
    numeric value nearer the deployed one: the same settings failing together again, at a smaller threshold (a
    pipelined all-gather with 4 GiB, then with 2 GiB and an overlap limit). Their drop-one variants would only fail
    once more to show it (stress-combo-oom: one run more per step down)."""
    mine = {name: (value, side) for name, value, side in members}
    out = []
    for blame in blames:
        if not blame.company or any(name not in mine for name, _, _ in blame.members()) \
                or len(blame.members()) == len(members):
            continue
        same = all(render_value(mine[name][0]) == render_value(value) if not direction
                   else mine[name][1] == direction for name, value, direction in blame.members())
        if same:
            out.append([(name, *mine[name]) for name, _, _ in blame.members()])
    return out


def _unstated_sides(params: Mapping[str, Any], failures: Sequence[tuple[str, dict[str, Scalar]]],
                    ok_values: Mapping[str, Sequence[Scalar]], deployed: Mapping[str, str | None]) -> dict[str, int]:
    """The side a numeric setting fails on where the space does not state its deployed value (a batch size the job's
    arguments leave at the framework's default): +1 (-1) where every value that failed alone lies above (below)
    every value that ran. With no deployed value to point away from, its blames had no direction, and a policy that
    runs out of memory beside a bigger batch was never tried beside a smaller one (stress-remat-batch: 0 of 30 seeds
    within 1 % of the best, the minimal remat policy at a batch of 7)."""
    out: dict[str, int] = {}
    for failure_class, settings in failures:
        if len(settings) != 1 or failure_class in REJECTED:
            continue
        (name, value), = settings.items()
        param = params.get(name)
        ran = [float(v) for v in ok_values.get(name, ()) if is_number(v)]
        if param is None or param.choices is not None or not is_number(value) or deployed.get(name) is not None \
                or not ran:
            continue
        side = 1 if float(value) > max(ran) else -1 if float(value) < min(ran) else 0  # type: ignore[arg-type]
        out[name] = side if out.get(name, side) == side else 0
    return out


def _side(param: Any, value: Scalar, deployed: str | None, unstated: int) -> int:
    """+1 (-1) for a numeric value above (below) the deployed one; 0 for any other. Where the deployed value is not
    stated, the side its failures alone show (``unstated``, :func:`_unstated_sides`)."""
    if param is None or param.choices is not None or not is_number(value):
        return 0
    if deployed is None:
        return unstated
    try:
        return 1 if float(value) > float(deployed) else -1  # type: ignore[arg-type]
    except ValueError:
        return 0
