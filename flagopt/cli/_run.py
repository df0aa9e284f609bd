"""``flagopt run --space FILE``: run or resume the study of a space."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path

from flagopt.cli._common import add_storage, console, examples
from flagopt.errors import EXIT_FAILURE, FlagoptError
from flagopt.executors import BaseExecutor
from flagopt.space import Space, check_workdir, load_space
from flagopt.study import (Observers, PinnedNodesDown, Progress, StudyRunner, prepare_storage, shown_url, storage_url,
                           study_folder)


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run or resume the tuning study of a space file",
                       **examples("python -m flagopt run --space search_spaces/demo.yaml", "python -m flagopt run --space search_spaces/pp.yaml --executor slurm --nodelist gpu[01-16]"))
    p.add_argument("--space", required=True, metavar="FILE")
    add_storage(p)
    p.add_argument("--trials", type=positive_int, default=None, metavar="N",
                   help="launch at most N runs in this invocation")
    p.add_argument("--sampler", choices=("tpe", "gp", "random"), default=None, help="default: the space's, else tpe")
    p.add_argument("--executor", choices=("local", "slurm", "slurm-steps"), default=None,
                   help="override executor.kind (slurm-steps: each trial an srun step of the salloc allocation "
                        "flagopt runs in; docs/slurm.md)")
    p.add_argument("--nodelist", default=None, help="override executor.slurm.nodelist: run on these pinned nodes, "
                                                    "one slot")
    p.add_argument("--slot", action="append", default=None, metavar="NODELIST",
                   help="override executor.slurm.slots: one pinned node group per --slot (repeat it)")
    p.add_argument("--partition", default=None, help="override executor.slurm.partition")
    p.add_argument("--rebaseline", action="store_true",
                   help="accept a space change that invalidates the earlier runs (command, baseline, nodelist...): "
                        "start a new epoch with new baselines that never mixes with them")
    p.add_argument("--force", action="store_true",
                   help="take over the study lock of a driver shown to be dead (gone pid here, stale heartbeat elsewhere)")
    p.add_argument("--detach", action="store_true",
                   help="on Ctrl-C / SIGTERM leave running jobs running (a later `run` re-attaches them)")
    p.add_argument("--no-preflight", action="store_true", help="skip the XLA flag pre-flight check")
    p.add_argument("--quiet", action="store_true", help="no per-trial output")
    p.set_defaults(handler=run)


def positive_int(text: str) -> int:
    """``--trials``: a count of runs to launch; 0 or less would silently launch nothing."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def make_executor(space: Space, storage: str | None, folder: Path | None = None) -> tuple[BaseExecutor, int]:
    """The space's executor, its job files in ``folder`` (default: the study folder's ``jobs``); and its jobs per slot."""
    folder = folder or study_folder(storage, space.name) / "jobs"
    if space.executor.kind == "slurm":
        from flagopt.executors import SlurmExecutor, SlurmSettings
        settings = SlurmSettings.of(space.executor.slurm)
        # Two in flight: the next job waits in Slurm's queue on the pinned nodes, so they never sit idle.
        return SlurmExecutor(folder, settings), SlurmExecutor.jobs_per_slot
    if space.executor.kind == "slurm-steps":
        from flagopt.executors import SlurmSettings, SlurmStepsExecutor
        return SlurmStepsExecutor(folder, SlurmSettings.of(space.executor.slurm), timeout_min=space.timeout_min), 1
    from flagopt.executors import LocalExecutor
    return LocalExecutor(folder, timeout_min=space.timeout_min), 1


def apply_overrides(space: Space, args: argparse.Namespace) -> Space:
    from dataclasses import replace
    executor = space.executor
    if args.executor:
        executor = replace(executor, kind=args.executor)
    slurm = executor.slurm
    if args.nodelist and getattr(args, "slot", None):
        raise FlagoptError("run", "--slot", "give either --nodelist (one slot) or --slot (several), not both")
    if args.nodelist:
        slurm = replace(slurm, nodelist=args.nodelist, slots=())
    if getattr(args, "slot", None):
        if len(set(args.slot)) != len(args.slot):
            raise FlagoptError("run", "--slot", "a node group is given twice: each slot is its own node group")
        slurm = replace(slurm, nodelist=None, slots=tuple(args.slot))
    if args.partition:
        slurm = replace(slurm, partition=args.partition)
    given = [flag for flag, value in (("--nodelist", args.nodelist), ("--slot", getattr(args, "slot", None)),
                                      ("--partition", args.partition)) if value]
    if given and executor.kind != "slurm":
        # a local run would ignore them, and the user would believe the study ran on those nodes
        raise FlagoptError("run", given[0], f"applies to the Slurm executor, and {space.source.name} runs trials "
                                            "locally (executor.kind: local): add --executor slurm, or leave it out")
    return replace(space, executor=replace(executor, slurm=slurm))


def run(args: argparse.Namespace) -> int:
    space = apply_overrides(load_space(args.space), args)
    if space.executor.kind == "local":  # --executor local on a Slurm space: the command runs here
        check_workdir(str(space.source), space.workdir)
    out = console()
    slurm = space.executor.slurm
    if space.executor.kind == "slurm" and slurm.slots:
        from flagopt.executors import check_slots
        for slot, why in check_slots(slurm.slots, slurm.nodes).items():  # disjoint, same shape, at least one up
            out.print(f"[yellow]slot {slot} cannot run trials ({why}); the study runs on the other slots[/yellow]")
    elif space.executor.kind == "slurm" and slurm.nodelist:
        from flagopt.executors import check_pinned_nodes
        check_pinned_nodes(slurm.nodelist)
    excluded: list[str] = []
    if not args.no_preflight:
        from flagopt.cli._preflight import run_preflight
        excluded = sorted(run_preflight(space, out, before_run=True).rejected)
    if space.executor.kind == "slurm-steps":
        from flagopt.executors import require_allocation
        require_allocation()  # outside salloc: one error before anything is written
    prepare_storage(args.storage, space.name)  # a bad storage path is one error before anything is written
    executor, in_flight = make_executor(space, args.storage)
    from flagopt.dashboard import LiveView
    progress = Progress(out, quiet=args.quiet)
    runner = StudyRunner(space=space, executor=executor, storage=args.storage, sampler=args.sampler,
                         n_trials=args.trials, force=args.force, detach=args.detach, rebaseline=args.rebaseline,
                         max_in_flight=in_flight, progress=Observers(LiveView(progress.note), progress),
                         default_of=_registry_default(), preflight_excluded=tuple(excluded),
                         handle_signals=getattr(args, "own_signals", False))
    out.print(f"study [bold]{space.name}[/bold] ({space.model_tag}, {space.parallelism or 'parallelism not given'}) "
              f"on {executor.kind}; storage {shown_url(storage_url(args.storage))}")
    try:
        verdict = runner.run()
    except PinnedNodesDown:
        # the study so far (and its node-down verdict) before the one error line that names the node
        from flagopt.cli._leaderboard import run as print_leaderboard
        print_leaderboard(argparse.Namespace(study=space.name, storage=args.storage, json=False, wide=False))
        raise
    resume = shlex.join(["python", "-m", "flagopt", "run", "--space", str(args.space)]
                        + (["--storage", shown_url(args.storage)] if args.storage else []))
    if runner.stop_signal is not None:
        # One line for the person who pressed Ctrl-C (or sent SIGTERM), and the shell's status for that signal.
        what = "Ctrl-C" if runner.stop_signal == signal.SIGINT else signal.Signals(runner.stop_signal).name
        jobs = ("the running jobs were left running; `" + resume + "` re-attaches them") if args.detach else \
            ("the running jobs were cancelled and will run again; `" + resume + "` resumes the study")
        print(f"flagopt: cancelled by you ({what}): {jobs}", file=sys.stderr)
        return 128 + runner.stop_signal
    if not any(r.is_baseline and r.ok for r in runner.records()):
        # cron and CI read the status: a study that measured nothing is not a success
        why = f" ({verdict.reason}: {verdict.message})" if verdict is not None else ""
        print(f"flagopt: error: nothing could be measured: baseline-deployed never ran ok{why}", file=sys.stderr)
        return EXIT_FAILURE
    out.print(f"next: python -m flagopt leaderboard {space.name}"
              + (f" --storage {shlex.quote(shown_url(args.storage))}" if args.storage else ""))
    # a study stopped early, or one whose baseline never ran, has no answer: a script must not take it for one
    return 0 if verdict is None or verdict.reason not in ("stopped", "baseline-failed") else EXIT_FAILURE


def _registry_default():
    from flagopt.flags import FlagRegistry
    return FlagRegistry.load().default
