"""The run-time sections of a space file: ``executor`` (Slurm settings, slots), ``stop``, ``noise``, ``failures``,
``numerics`` and ``export``; each read into its frozen spec or refused with one error naming the key."""

from __future__ import annotations

import re
from dataclasses import replace

from flagopt.failure_classes import FAILURE_CLASSES
from flagopt.space._checks import Reader, check_name, check_value, choice
from flagopt.space._model import ExecutorSpec, ExportSpec, FailureSpec, NoiseSpec, NumericsSpec, SlurmSpec, StopSpec


def executor_section(r: Reader) -> ExecutorSpec:
    r.only("kind", "slurm")
    kind = choice(r, "kind", ("local", "slurm", "slurm-steps"), "local")
    s = r.sub("slurm")
    s.only("partition", "nodelist", "slots", "nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "time", "account",
           "qos", "exclusive", "additional", "pending_deadline_min")
    additional = s.sub("additional")
    for k, v in additional.data.items():
        if not isinstance(k, str) or not re.match(r"[a-z][a-z0-9_-]*\Z", k):
            additional.fail("sbatch parameter names are lower-case words", additional.key(str(k)))
        check_value(r.source, additional.key(k), v)
    def count(key: str, default: int | None) -> int | None:  # what Slurm takes: a whole number >= 1
        value = s.get(key, int, default)
        if value is not None and value < 1:
            s.fail(f"must be a whole number >= 1, got {value}", s.key(key))
        return value

    deadline = s.number("pending_deadline_min", 10.0, low=0)
    if deadline <= 0:
        s.fail(f"must be > 0 minutes (how long a job may wait in the queue), got {deadline}", s.key("pending_deadline_min"))
    slurm = SlurmSpec(
        partition=s.get("partition", str), nodelist=s.get("nodelist", str), nodes=count("nodes", 1),
        tasks_per_node=count("tasks_per_node", 1), gpus_per_node=count("gpus_per_node", None),
        cpus_per_task=count("cpus_per_task", None), time_min=count("time", None), account=s.get("account", str),
        qos=s.get("qos", str), exclusive=s.get("exclusive", bool, True),
        additional=tuple((k, str(v)) for k, v in additional.data.items()),
        pending_deadline_min=deadline,
    )
    for key in ("partition", "nodelist", "account", "qos"):
        value = getattr(slurm, key)
        if value is not None:
            check_value(r.source, s.key(key), value)
    slots = _slots(s)
    if slots and slurm.nodelist is not None:
        s.fail("give either nodelist (one slot) or slots (several), not both", s.key("slots"))
    return ExecutorSpec(kind=kind, slurm=replace(slurm, slots=slots))


def _slots(s: Reader) -> tuple[str, ...]:
    raw = s.get("slots", list)
    if raw is None:
        return ()
    if not raw:
        s.fail("must list at least one nodelist", s.key("slots"))
    out: list[str] = []
    for i, item in enumerate(raw):
        key = f"{s.key('slots')}[{i}]"
        if not isinstance(item, str) or not item.strip():
            s.fail(f"must be a nodelist such as gpu[01-08], got {item!r}", key)
        check_value(s.source, key, item)
        if not re.match(r"[A-Za-z0-9_.,\[\]-]+\Z", item):
            s.fail(f"{item!r} is not a Slurm nodelist (names, ranges in [], commas)", key)
        if item in out:
            s.fail(f"{item!r} is listed twice: each slot is its own node group", key)
        out.append(item)
    return tuple(out)


def stop_section(r: Reader) -> StopSpec:
    r.only("win", "null_gain", "max_null", "max_trials", "max_hours", "refine")
    return StopSpec(win=r.number("win", 0.05, low=0), null_gain=r.number("null_gain", 0.02, low=0),
                    max_null=int(r.number("max_null", 25, low=1)), max_trials=_optional_int(r.number("max_trials", None, low=1)),
                    max_hours=r.number("max_hours", None, low=0), refine=int(r.number("refine", 20, low=0)))


def _optional_int(value: float | None) -> int | None:
    return None if value is None else int(value)


def noise_section(r: Reader) -> NoiseSpec:
    r.only("baseline_every", "min_runs", "confidence", "min_effect", "max_repeats")
    every = r.get("baseline_every", (int, str))
    if isinstance(every, str) and every != "auto":
        r.fail("must be an integer or `auto`", r.key("baseline_every"))
    if isinstance(every, int) and every < 1:
        r.fail("must be >= 1", r.key("baseline_every"))
    return NoiseSpec(baseline_every=every if isinstance(every, int) else None,
                     min_runs=int(r.number("min_runs", 3, low=2)),
                     confidence=r.number("confidence", 0.95, low=0.5, high=0.999),
                     min_effect=r.number("min_effect", 0.01, low=0), max_repeats=int(r.number("max_repeats", 6, low=1)))


def failures_section(r: Reader) -> FailureSpec:
    r.only("hang_min", "init_timeout_min", "signatures")
    sigs = []
    for i, item in enumerate(r.get("signatures", list, [])):
        sr = Reader(r.source, item, f"{r.key('signatures')}[{i}]")
        sr.only("class", "pattern")
        pattern = sr.get("pattern", str, required=True)
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            sr.fail(f"not a valid regular expression: {exc}", sr.key("pattern"))
        cls = sr.get("class", str, required=True)
        if cls not in FAILURE_CLASSES:
            sr.fail(f"unknown failure class {cls!r} (one of {', '.join(FAILURE_CLASSES)})", sr.key("class"))
        sigs.append((cls, pattern))
    return FailureSpec(hang_min=r.number("hang_min", 10.0, low=0.01),
                       init_timeout_min=r.number("init_timeout_min", 20.0, low=0.01), signatures=tuple(sigs))


def numerics_section(r: Reader) -> NumericsSpec:
    r.only("tolerance", "allow")
    return NumericsSpec(tolerance=r.number("tolerance", None, low=0), allow=r.get("allow", bool, False))


def export_section(r: Reader) -> ExportSpec:
    r.only("guard", "guard_variable")
    variable = r.get("guard_variable", str, "FLAGOPT_PARALLELISM")
    check_name(r.source, r.key("guard_variable"), variable, "env")
    return ExportSpec(guard_variable=variable, guard=r.get("guard", bool, True))
