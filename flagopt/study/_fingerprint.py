"""What a study measures: a fingerprint of the space, and whether a changed space may resume the study.

A study's runs are comparable only while they measure the same job: the same command in the same folder, the same
deployed baseline (env files included, by content), the same metric, the same hardware shape, and params whose
earlier values still mean what they meant. ``run`` compares the stored fingerprint with the space's and refuses a
change that invalidates the earlier runs, unless ``--rebaseline`` starts a new epoch (new baselines, the earlier
runs never mixed in). Changes that leave every earlier run valid are accepted and said.

What invalidates (the earlier runs would be scored against a different job, or pooled with different arms):
command, workdir, baseline (flags, env, env-file content, args, defaults), metric, configs, the executor's kind
and shape (nodelist, partition, nodes, tasks and GPUs per node, cpus per task, exclusive, extra sbatch
parameters), a param removed or re-targeted, a param domain that drops values (a removed choice, a narrower range,
another type, step or log scale), a profile removed or changed. A param removed, or choices removed, that no run of
the epoch ever set (a value pre-flight rejected) invalidate nothing.

What is harmless (every earlier run is still a valid measurement of a configuration the space allows): the stop
rule and noise settings, timeouts and failure signatures, numerics, export, sampler and seed, evidence, labels
(model_tag, parallelism), Slurm accounting (time, account, qos, pending deadline), slots after the first (each
is a block with its own baselines; the first stands for ``nodelist``), a new choice value, a wider
numeric range, a new profile, and a new param (earlier runs are configurations with that knob at its deployed
value, which the new param's domain may or may not include: they stay what they measured).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from flagopt.errors import StudyError
from flagopt.space import FLAG_VARIABLES, Param, Space
from flagopt.study._records import current_history

#: the study's user attr: a compact hash of the fingerprint (``sha256:<16 hex>``), what ``optuna studies`` shows
ATTR = "flagopt.fingerprint"
#: the study's system attr with the full fingerprint (8-12 KB of JSON): kept out of ``optuna studies`` and the
#: dashboard, which print every user attr of every study
FULL_ATTR = "flagopt.fingerprint.full"
EPOCH_ATTR = "flagopt.epoch"
#: top-level sections whose every change invalidates the earlier runs
MEASUREMENT = ("command", "workdir", "baseline", "inherited", "metric", "configs", "executor")


@dataclass(frozen=True)
class Change:
    key: str
    old: Any
    new: Any
    invalidates: bool
    why: str = ""

    def line(self) -> str:
        def show(v: Any) -> str:
            return "(absent)" if v is _ABSENT else json.dumps(v, default=str)

        return f"  {self.key}: {show(self.old)} -> {show(self.new)}" + (f" ({self.why})" if self.why else "")


_ABSENT = object()


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _param(p: Param) -> dict[str, Any]:
    domain = {"choices": list(p.choices)} if p.choices is not None else \
        {"type": p.type, "low": p.low, "high": p.high, "log": p.log, "step": p.step}
    return {"target": p.target, "key": p.key, **domain}


def fingerprint(space: Space, inherited: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything that changes what a run measures, as plain JSON (stored on the study).

    ``inherited`` (default: this process's environment): the driver's ``XLA_FLAGS`` / ``LIBTPU_INIT_ARGS`` come first
    in every run's flags (:func:`flagopt.render.render`), so a resume from a shell with other ones measures another job.
    """
    inherited = os.environ if inherited is None else inherited
    b, m, x = space.baseline, space.metric, space.executor
    executor: dict[str, Any] = {"kind": x.kind}
    if x.kind in ("slurm", "slurm-steps"):
        s = x.slurm
        # The first slot is the study's reference hardware; further slots are blocks of their own (own baselines),
        # so adding or removing one leaves every earlier run valid.
        executor["slurm"] = dict(nodelist=s.slot_nodelists[0], partition=s.partition, nodes=s.nodes,
                                 tasks_per_node=s.tasks_per_node, gpus_per_node=s.gpus_per_node,
                                 cpus_per_task=s.cpus_per_task, exclusive=s.exclusive, additional=dict(s.additional))
    return _plain({
        "command": list(space.command),
        "workdir": str(space.workdir.resolve()),
        "baseline": {"xla_flags": list(b.xla_flags), "libtpu_flags": list(b.libtpu_flags), "env": dict(b.env),
                     "args": dict(b.args), "defaults": dict(b.defaults)},
        "inherited": {v: inherited[v] for v in FLAG_VARIABLES.values() if inherited.get(v)},
        "metric": {"format": m.format, "field": m.field, "regex": m.pattern, "window": list(m.window),
                   "direction": m.direction, "tokens_per_step": m.tokens_per_step},
        "configs": {name: dict(args) for name, args in space.configs},
        "executor": executor,
        "params": {p.name: _param(p) for p in space.params},
        "profiles": {c.profile: c.settings() for c in space.profiles},
        "settings": {"model_tag": space.model_tag, "parallelism": space.parallelism, "timeout_min": space.timeout_min,
                     "stop": space.stop.__dict__, "noise": space.noise.__dict__, "failures": space.failures.__dict__,
                     "numerics": space.numerics.__dict__, "export": space.export.__dict__, "sampler": space.sampler,
                     "screen": space.screen,
                     "seed": space.seed, "evidence": space.evidence,
                     "slurm": {**{k: getattr(x.slurm, k) for k in ("time_min", "account", "qos", "pending_deadline_min")},
                               **({"slots": list(x.slurm.slots)} if x.slurm.slots else {})}},
    })


def _leaves(old: Any, new: Any, key: str, invalidates: bool) -> list[Change]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in [*old, *(k for k in new if k not in old)]:
            out += _leaves(old.get(k, _ABSENT), new.get(k, _ABSENT), f"{key}.{k}", invalidates)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [c for i, (o, n) in enumerate(zip(old, new)) for c in _leaves(o, n, f"{key}[{i}]", invalidates)]
    return [] if old == new else [Change(key, old, new, invalidates)]


def _param_change(name: str, old: Any, new: Any) -> list[Change]:
    key = f"params.{name}"
    if old == new:
        return []
    if old is _ABSENT:
        return [Change(key, old, new, False, "new param: earlier runs had it at its deployed value")]
    if new is _ABSENT:
        return [Change(key, old, new, True, "removed: earlier sampled runs set a knob the space no longer tunes")]
    if (old["target"], old["key"]) != (new["target"], new["key"]):
        return [Change(key, old, new, True, "another knob under the same name")]
    if "choices" in old and "choices" in new:
        gone = [c for c in old["choices"] if c not in new["choices"]]
        added = [c for c in new["choices"] if c not in old["choices"]]
        why = f"drops {', '.join(map(str, gone))}" if gone else \
            (f"adds {', '.join(map(str, added))}" if added else "reordered")
        return [Change(f"{key}.choices", old["choices"], new["choices"], bool(gone), why)]
    if "choices" in old or "choices" in new or any(old[k] != new[k] for k in ("type", "log", "step")):
        return [Change(key, old, new, True, "another domain: earlier values may not be in it")]
    wider = new["low"] <= old["low"] and new["high"] >= old["high"]
    return [Change(f"{key}.range", [old["low"], old["high"]], [new["low"], new["high"]], not wider,
                   "wider" if wider else "narrower: earlier runs may lie outside it")]


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """The differences between two fingerprints, each marked as invalidating the earlier runs or not."""
    changes: list[Change] = []
    for section in MEASUREMENT:
        # a fingerprint from before "inherited" was stored: the shell's flags were not known, take them as none
        missing = {} if section == "inherited" else _ABSENT
        changes += _leaves(old.get(section, missing), new.get(section, missing), section, True)
    changes = [Change(c.key, c.old, c.new, True, "the command runs in another folder; a relative workdir is "
                      "resolved against the folder flagopt is started from") if c.key == "workdir" else c
               for c in changes]
    changes = [Change(c.key, c.old, c.new, True, "the shell flagopt runs in sets other flags, and every run starts "
                      "from them") if c.key.startswith("inherited") else c for c in changes]
    old_params, new_params = old.get("params", {}), new.get("params", {})
    for name in [*old_params, *(n for n in new_params if n not in old_params)]:
        changes += _param_change(name, old_params.get(name, _ABSENT), new_params.get(name, _ABSENT))
    old_profiles, new_profiles = old.get("profiles", {}), new.get("profiles", {})
    for name in [*old_profiles, *(n for n in new_profiles if n not in old_profiles)]:
        o, n = old_profiles.get(name, _ABSENT), new_profiles.get(name, _ABSENT)
        if o != n:
            why = "new profile" if o is _ABSENT else ("removed" if n is _ABSENT else "other settings, same name")
            changes.append(Change(f"profiles.{name}", o, n, o is not _ABSENT, why))
    changes += _leaves(old.get("settings", {}), new.get("settings", {}), "settings", False)
    return changes


_PART = {"xla": "xla", "libtpu": "libtpu", "env": "env", "arg": "args"}


def _unused_ok(changes: list[Change], old: dict[str, Any], new: dict[str, Any], history: list) -> list[Change]:
    """A removed param, or removed choices, that no run of the epoch ever set leave every run valid.

    Issue 23: a param whose every value pre-flight rejected was never run; removing it from the space (as the
    verdict advised) was refused, which put aside the 13 valid runs of the study.
    """
    def used(param: dict[str, Any], values: list[Any] | None) -> bool:
        part = _PART.get(param.get("target", ""), param.get("target", ""))
        for rec in history:
            if rec.status == "invalid":
                continue  # never ran: rejected before the job started
            settings = (rec.attrs.get("settings") or {}).get(part) or {}
            if param["key"] in settings and (values is None or str(settings[param["key"]]).lower()
                                             in {str(v).lower() for v in values}):
                return True
        return False

    out = []
    for c in changes:
        name = c.key.split(".")[1] if c.key.startswith("params.") else ""
        param = old.get("params", {}).get(name)
        if c.invalidates and param and c.key == f"params.{name}" and c.new is _ABSENT and not used(param, None):
            c = Change(c.key, c.old, c.new, False, "removed; no run of this study set it")
        elif c.invalidates and param and c.key == f"params.{name}.choices" and "choices" in param:
            gone = [v for v in c.old if v not in c.new]
            if not used(param, gone):
                c = Change(c.key, c.old, c.new, False, f"drops {', '.join(map(str, gone))}, which no run of this epoch set")
        out.append(c)
    return out


class StudyChanged(StudyError):
    """The space no longer measures what the study's runs measured."""


def _legacy(study: optuna.Study, new: dict[str, Any]) -> dict[str, Any] | None:
    """A study from before fingerprints: only its recorded executor can be compared."""
    executor = study.user_attrs.get("flagopt.executor")
    if not executor:
        return None
    old = json.loads(json.dumps(new))
    old["executor"]["kind"] = executor.get("kind", new["executor"]["kind"])
    if "slurm" in new["executor"]:
        old["executor"]["slurm"].update({k: v for k, v in executor.items() if k in new["executor"]["slurm"]})
    return old


def digest(print_: dict[str, Any]) -> str:
    """A compact, stable name for a fingerprint: what the study's visible attribute holds."""
    text = json.dumps(print_, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def stored_fingerprint(study: optuna.Study) -> dict[str, Any] | None:
    """The fingerprint the study was last run with: the full text from its system attr, or, for a study from
    before the hash, the user attr itself (the full dictionary)."""
    # Optuna's Study has no public reader of system attrs; its storage's is public API.
    full = study._storage.get_study_system_attrs(study._study_id).get(FULL_ATTR)
    if full is not None:
        return full
    old = study.user_attrs.get(ATTR)
    return old if isinstance(old, dict) else None


def store_fingerprint(study: optuna.Study, print_: dict[str, Any]) -> None:
    """The full fingerprint out of sight, its hash where people look."""
    study._storage.set_study_system_attr(study._study_id, FULL_ATTR, print_)
    study.set_user_attr(ATTR, digest(print_))


def bind_study(study: optuna.Study, space: Space, *, rebaseline: bool) -> list[str]:
    """Check ``space`` against what ``study`` measured so far; store its fingerprint; return notes to print.

    Raises:
        StudyChanged: a change invalidates the current epoch's runs and ``rebaseline`` is false.
    """
    new = fingerprint(space)
    old = stored_fingerprint(study) or _legacy(study, new)
    history = current_history(study)
    changes = _unused_ok(compare(old, new), old, new, history) if old is not None else []
    breaking = [c for c in changes if c.invalidates]
    runs = len(history)
    notes = []
    if breaking and runs and not rebaseline:
        raise StudyChanged(str(space.source), None, "\n".join([
            f"study {space.name!r} has {runs} runs of another setup; these changes make them incomparable:",
            *(c.line() for c in breaking), *(["harmless:"] + [c.line() for c in changes if not c.invalidates]
                                             if len(changes) > len(breaking) else []),
            "Either give the space a new `name:` (a new study; this one stays as it is), or run again with "
            "--rebaseline: a new epoch with new baselines that never mixes with the earlier runs."]))
    if breaking and runs:
        epoch = int(study.user_attrs.get(EPOCH_ATTR, 0)) + 1
        study.set_user_attr(EPOCH_ATTR, epoch)
        notes.append(f"--rebaseline: epoch {epoch} starts with new baselines; the {runs} earlier runs are kept "
                     "but not mixed in (" + "; ".join(c.key for c in breaking) + ")")
    elif rebaseline:
        notes.append("--rebaseline: nothing changed that invalidates the earlier runs; the study continues")
    accepted = [c for c in changes if not c.invalidates]
    if accepted and not breaking:
        notes.append("space changed, earlier runs still valid: " + "; ".join(
            f"{c.key} {c.why}" if c.why else f"{c.key} {json.dumps(c.old, default=str)} -> "
                                              f"{json.dumps(c.new, default=str)}" for c in accepted))
    store_fingerprint(study, new)
    return notes
