"""The sections of a space file that say what a trial sets: ``params`` (each a target and a domain), ``profiles``
(named configurations) and ``configs`` (the workload variants a winner is checked on); each read into its frozen
spec or refused with one error naming the key."""

from __future__ import annotations

import math
import re
from typing import Any

from flagopt.space._checks import Reader, check_name, check_value
from flagopt.space._model import Param, TrialConfig

TARGETS = ("xla", "libtpu", "env", "arg")


def assignments(r: Reader, target: str) -> tuple[tuple[str, Any], ...]:
    """``name: value`` pairs of one target (flags, env vars, workload args), each name and value checked."""
    out = []
    for name, value in r.data.items():
        check_name(r.source, r.key(str(name)), name, target)
        check_value(r.source, r.key(name), value)
        out.append((name, value))
    return tuple(out)


def params_section(r: Reader) -> tuple[Param, ...]:
    out = []
    for name, spec in r.data.items():
        if not isinstance(name, str) or not re.match(r"[A-Za-z_][A-Za-z0-9_]*\Z", name):
            r.fail("param names must be identifiers", r.key(str(name)))
        out.append(_param(Reader(r.source, spec, r.key(name)), name))
    return tuple(out)


def _param(r: Reader, name: str) -> Param:
    r.only(*TARGETS, "choices", "type", "low", "high", "log", "step", "default")
    targets = [t for t in TARGETS if t in r.data]
    if len(targets) != 1:
        r.fail(f"needs exactly one target of {', '.join(TARGETS)}, got {len(targets)}"
               + (f" ({', '.join(targets)})" if targets else ""))
    target = targets[0]
    key = check_name(r.source, r.key(target), r.data[target], target)
    if "choices" in r.data:
        for extra in ("type", "low", "high", "log", "step"):
            if extra in r.data:
                r.fail("`choices` and a numeric range are two domains: keep one", r.key(extra))
        choices = r.get("choices", list)
        if not choices:
            r.fail("must not be empty", r.key("choices"))
        for i, value in enumerate(choices):
            check_value(r.source, f"{r.key('choices')}[{i}]", value)
        if len({(type(c), c) for c in choices}) != len(choices):
            r.fail("has duplicate values", r.key("choices"))
        return Param(name=name, target=target, key=key, choices=tuple(choices),
                     default=_default(r, bool if all(isinstance(c, bool) for c in choices) else None))
    kind = r.get("type", str)
    if kind is None:
        r.fail("needs a domain: `choices: [...]` or `type: int|float` with `low` and `high`")
    if kind not in ("int", "float"):
        r.fail(f"must be int or float, got {kind!r}", r.key("type"))
    number = int if kind == "int" else (int, float)
    low = r.get("low", number, required=True)
    high = r.get("high", number, required=True)
    log = r.get("log", bool, False)
    step = r.get("step", number)
    for bound, value in (("low", low), ("high", high), ("step", step)):
        if value is not None and not math.isfinite(value):
            r.fail(f"must be a finite number, got {value}", r.key(bound))
    if low > high:
        r.fail(f"low ({low}) must be <= high ({high})", r.key("low"))
    if log and low <= 0:
        r.fail(f"must be > 0 when log: true, got {low}", r.key("low"))
    if log and step is not None:
        r.fail("cannot be combined with log: true", r.key("step"))
    if step is not None and step <= 0:
        r.fail(f"must be > 0, got {step}", r.key("step"))
    return Param(name=name, target=target, key=key, type=kind, low=low, high=high, log=log, step=step,
                 default=_default(r, number))


def _default(r: Reader, kind: type | tuple[type, ...] | None) -> Any:
    """``default:``: the value the job has when the param sets nothing; of the domain's type when it has one."""
    if "default" not in r.data:
        return None
    value = r.data["default"]
    check_value(r.source, r.key("default"), value)
    if kind is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        r.fail(f"must be of the param's type ({'true/false' if kind is bool else 'a number'}), got {value!r}",
               r.key("default"))
    return value


def profiles_section(r: Reader, params: tuple[Param, ...]) -> tuple[TrialConfig, ...]:
    out = []
    by_name = {p.name: p for p in params}
    for name, spec in r.data.items():
        if not isinstance(name, str) or name in ("sampled", "baseline-deployed", "baseline-no-env"):
            r.fail("is a reserved or invalid profile name", r.key(str(name)))
        pr = Reader(r.source, spec, r.key(name))
        pr.only("xla", "libtpu", "env", "args", "params", "description")
        sets: dict[str, list[tuple[str, Any]]] = {"xla": [], "libtpu": [], "env": [], "arg": []}
        for section, target in (("xla", "xla"), ("libtpu", "libtpu"), ("env", "env"), ("args", "arg")):
            sets[target].extend(assignments(pr.sub(section), target))
        param_r = pr.sub("params")
        for pname, value in param_r.data.items():
            if pname not in by_name:
                pr.fail(f"unknown param {pname!r} (declared: {', '.join(by_name) or 'none'})", param_r.key(str(pname)))
            check_value(r.source, param_r.key(pname), value)
            sets[by_name[pname].target].append((by_name[pname].key, value))
        if not any(sets.values()):
            pr.fail("sets nothing: give at least one of xla, libtpu, env, args, params")
        out.append(TrialConfig(kind="profile", profile=name, xla=tuple(sets["xla"]), libtpu=tuple(sets["libtpu"]),
                               env=tuple(sets["env"]), args=tuple(sets["arg"])))
    return tuple(out)


def configs_section(r: Reader) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    out = []
    for name, spec in r.data.items():
        cr = Reader(r.source, spec, r.key(str(name)))
        cr.only("args")
        out.append((str(name), assignments(cr.sub("args"), "arg")))
    return tuple(out)
