"""``flagopt ab [STUDY] [--patch FILE | --trial N]... --pairs N``: verify patches against the deployed job.

A (the deployed job) and each patch run once per round, interleaved in Latin-square order, through the study's own
executor; the gain of each patch comes with a 95 % interval and a plain verdict, beside the study's claim. The
runs are recorded in ``<study folder>/ab/<id>.json``; running the same command again resumes an unfinished A/B.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
from pathlib import Path
from typing import Any

from flagopt import __version__, stats
from flagopt.ab import (
    DONE,
    AbRecord,
    AbRunner,
    arm_lines,
    find_resumable,
    patch_copy,
    record_key,
    round_table,
    patch_key,
    sha256_of,
)
from flagopt.cli._common import add_storage, console, examples
from flagopt.cli._run import apply_overrides, make_executor
from flagopt.decide import baseline_runs
from flagopt.errors import EXIT_FAILURE, FlagoptError, StudyError
from flagopt.space import Space, load_space
from flagopt.study import StudyData, study_data, study_folder

#: the export's header line naming its study and trial (flagopt.export.render_env_sh)
_EXPORT_HEADER = re.compile(r"^# study (\S+), trial (\d+) \(", re.MULTILINE)


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="A/B env.sh patches against the deployed job, interleaved (verify an export)",
                       **examples("python -m flagopt ab demo --pairs 5",
                                  "python -m flagopt ab --space fsdp.yaml --patch a.env.sh --patch b.env.sh --pairs 4"))
    p.add_argument("study", nargs="?", default=None,
                   help="the study whose job (and claim) to A/B; without it, give --space")
    p.add_argument("--space", metavar="FILE", default=None,
                   help="the space file whose deployed job is A (default: the study's own space file)")
    add_storage(p)
    p.add_argument("--patch", action="append", default=[], metavar="FILE",
                   help="an env.sh patch to source on top of the deployed job (repeat it to compare several)")
    p.add_argument("--trial", action="append", default=[], type=int, metavar="N",
                   help="A/B the export of the study's trial N (repeatable); default with a study and no --patch: "
                        "the study's export (its confirmed winner)")
    p.add_argument("--pairs", type=at_least_two, default=5, metavar="N",
                   help="rounds: each runs A and every patch once (default 5; at least 2 for an interval)")
    p.add_argument("--new", action="store_true",
                   help="start a new A/B even when an unfinished one of the same patches can be resumed")
    p.add_argument("--executor", choices=("local", "slurm"), default=None, help="override executor.kind")
    p.add_argument("--nodelist", default=None, help="override executor.slurm.nodelist (one slot)")
    p.add_argument("--slot", action="append", default=None, metavar="NODELIST",
                   help="override executor.slurm.slots: one pinned node group per --slot; rounds spread over them")
    p.add_argument("--partition", default=None, help="override executor.slurm.partition")
    p.add_argument("--quiet", action="store_true", help="no per-run lines")
    p.set_defaults(handler=run)


def at_least_two(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 (one pair gives no interval), got {value}")
    return value


def _space(args: argparse.Namespace, data: StudyData | None) -> Space:
    if args.space:
        return load_space(args.space)
    if data is None:
        raise FlagoptError("ab", "--space", "give a study or --space FILE: the deployed job to compare against")
    path = data.attrs.get("flagopt.space_path")
    if not path or not Path(path).is_file():
        raise FlagoptError(data.name, "flagopt.space_path", f"the study's space file {path or '(not recorded)'} is "
                                                            "gone: give it with --space FILE")
    return load_space(path)


def _claim(data: StudyData, trial: int | None) -> tuple[str, dict[str, Any]]:
    """The export of ``trial`` (``None``: the study's winner) as env.sh text, and what the study claims for it."""
    from flagopt.export import build_export, render_env_sh
    ex = build_export(data, trial)
    p = ex.provenance
    return render_env_sh(ex), {"study": data.name, "trial": p["trial"], "label": p["label"], "gain": p["gain"],
                               "ci": p["ci"], "runs": p["runs"], "confirmed": p["confirmed"]}


def _study_or_none(storage: str | None, name: str) -> StudyData | None:
    from flagopt.errors import StudyError
    try:
        return study_data(storage, name)
    except StudyError:
        return None


def _arms(args: argparse.Namespace, data: StudyData | None) -> list[dict[str, Any]]:
    """The patch arms as given: ``source`` (a file, or the text of an export) and the study's claim, if any."""
    if args.trial and data is None:
        raise FlagoptError("ab", "--trial", "needs a study: flagopt ab STUDY --trial N")
    arms: list[dict[str, Any]] = []
    for given in args.patch:
        path = Path(given)
        if not path.is_file():
            raise FlagoptError(given, None, "no such patch file (write one with `flagopt export STUDY -o FILE`)")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise FlagoptError(given, None, f"cannot read the patch: {exc}") from None
        claim = None
        named = _EXPORT_HEADER.search(text)
        source = data if data is not None and named and named.group(1) == data.name else None
        if source is None and data is None and named:
            source = _study_or_none(args.storage, named.group(1))  # an export of a study in this storage
        if source is not None and named:
            try:
                claim = _claim(source, int(named.group(2)))[1]
            except FlagoptError:
                claim = None  # the trial is gone from the study: a patch like any other
        arms.append({"label": path.name, "source": str(path.resolve()), "file": path, "claim": claim,
                     "key": patch_key(text)})
    trials: list[int | None] = list(args.trial) or ([None] if data is not None and not args.patch else [])
    for trial in trials:
        assert data is not None
        text, claim = _claim(data, trial)
        arms.append({"label": f"trial {claim['trial']} ({claim['label']})", "source": f"export of trial "
                     f"{claim['trial']}", "text": text, "claim": claim, "key": f"{data.name}:trial:{claim['trial']}"})
    if not arms:
        raise FlagoptError("ab", "--patch", "give at least one patch (--patch FILE) or a study to take its export")
    if len({a["key"] for a in arms}) != len(arms):
        raise FlagoptError("ab", "--patch", "the same patch is given twice")
    return arms


def _driver() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _refuse_live_driver(record: AbRecord) -> None:
    """Two drivers on one record would run every pair twice: refuse while the one that holds it is alive here."""
    driver = record.doc.get("driver") or {}
    if record.doc.get("state") != "running" or driver.get("host") != socket.gethostname():
        return
    try:
        os.kill(int(driver["pid"]), 0)
    except (ProcessLookupError, KeyError, ValueError, TypeError):
        return
    except PermissionError:
        pass
    raise StudyError(str(record.path), "driver", f"this A/B is being run by pid {driver['pid']} on this host: wait "
                                                 "for it, stop it (Ctrl-C), or start another with --new")


def _record(args: argparse.Namespace, space: Space, data: StudyData | None, say) -> AbRecord:
    arms = _arms(args, data)
    name = data.name if data is not None else space.name
    folder = study_folder(args.storage, name) / "ab"
    slurm = space.executor.slurm
    where = {"kind": space.executor.kind}
    if space.executor.kind == "slurm":
        where.update(nodelist=slurm.nodelist, slots=list(slurm.slots), partition=slurm.partition)
    key = record_key(space.name, where, [a["key"] for a in arms])
    record = None if args.new else find_resumable(folder, key)
    if record is not None:
        _refuse_live_driver(record)
        done = sum(1 for r in record.runs if r["status"] == "ok")
        say(f"resuming A/B {record.doc['id']} ({done} runs measured; --new starts afresh)")
        record.doc.update(pairs=args.pairs, state="running", driver=_driver())
        if "noise" not in record.doc and (noise := _study_noise(args.storage, data, arms)):
            record.doc["noise"] = noise  # a record written before the A/B named its stragglers
        return record
    record = AbRecord.create(
        folder, key=key, study=data.name if data is not None else None, flagopt=__version__,
        space={"name": space.name, "path": str(space.source), "model_tag": space.model_tag,
               "parallelism": space.parallelism},
        metric={"field": space.metric.field, "window": list(space.metric.window), "direction": space.metric.direction},
        executor=where, pairs=args.pairs, driver=_driver(), arms=[{"name": "A", "label": "deployed", "patch": None}])
    if noise := _study_noise(args.storage, data, arms):
        record.doc["noise"] = noise
    for i, arm in enumerate(arms, start=1):
        patches = record.dir / "patches"
        if "file" in arm:
            frozen = patch_copy(arm["file"], patches, i)
        else:
            patches.mkdir(parents=True, exist_ok=True)
            frozen = patches / f"{i}-trial-{arm['claim']['trial']}.env.sh"
            frozen.write_text(arm["text"])
        record.arms.append({"name": chr(ord("A") + i) if i < 26 else f"P{i}", "label": arm["label"],
                            "patch": str(frozen), "source": arm["source"], "sha256": sha256_of(frozen),
                            "claim": arm["claim"]})
    record.save()
    return record


def _study_noise(storage: str | None, data: StudyData | None, arms: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run noise of the A/B's study (else of the study a patch's claim names), measured on its controls: what
    the A/B judges a slow run by (flagopt.ab's stragglers); ``None`` without a study or with fewer than 3 controls."""
    if data is None:
        named = next((a["claim"]["study"] for a in arms if a.get("claim")), None)
        data = _study_or_none(storage, named) if named else None
    if data is None:
        return None
    runs = baseline_runs(data.records, data.direction)
    if len(runs) < 3:
        return None
    return {"study": data.name, "run_sigma": stats.run_noise(runs), "controls": len(runs)}


def run(args: argparse.Namespace) -> int:
    out = console()

    def say(text: str) -> None:
        out.print(text, markup=False, highlight=False, soft_wrap=True)  # a path is never broken

    data = study_data(args.storage, args.study) if args.study else None
    space = apply_overrides(_space(args, data), args)
    slurm = space.executor.slurm
    if space.executor.kind == "slurm" and slurm.slots:
        from flagopt.executors import check_slots
        for slot, why in check_slots(slurm.slots, slurm.nodes).items():
            say(f"slot {slot} cannot run jobs ({why}); the A/B runs on the other slots")
    elif space.executor.kind == "slurm" and slurm.nodelist:
        from flagopt.executors import check_pinned_nodes
        check_pinned_nodes(slurm.nodelist)
    record = _record(args, space, data, say)
    executor, _ = make_executor(space, args.storage, folder=record.dir / "jobs")
    arms = ", ".join(f"{a['name']} = {a['label']}" for a in record.arms)
    say(f"A/B {record.doc['id']} on {executor.kind}: {arms}; {args.pairs} rounds, order per round "
        f"{'A B / B A' if len(record.arms) == 2 else 'by Latin square'}; record {record.path}")
    runner = AbRunner(space, executor, record, say=(lambda _t: None) if args.quiet else say,
                      default_of=_registry_default())
    state = runner.run()
    say("")
    for line in round_table(record.doc):
        say(line)
    say("")
    for line in arm_lines(record.doc):
        say(line)
    say(f"record: {record.path}")
    if state != DONE:
        measured = sum(1 for r in record.runs if r["status"] == "ok")
        say(f"stopped: {runner.stop_reason}. Measured {measured} runs; the figures above are what they say. "
            "Run the same command again to resume.")
        return EXIT_FAILURE
    return 0


def _registry_default():
    from flagopt.flags import FlagRegistry
    return FlagRegistry.load().default
