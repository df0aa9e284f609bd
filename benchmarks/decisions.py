"""Benchmark flagopt's decisions against a manual protocol, random search, plain TPE, TPE with repeats and skopt.

Usage:
    python benchmarks/decisions.py --seeds 30 --null-seeds 50 --jobs 2 [--landscapes win10 null] [--families rand-win]
                                   [--strategies flagopt tpe] [--out docs/benchmark-decisions.md]
    python benchmarks/decisions.py --quick          # flagopt alone, 3 seeds, shipped landscapes: for iteration
    python benchmarks/decisions.py --landscape-file my_jobs.yaml   # your own landscapes (landscapes.yaml's schema)

Every strategy runs on the same simulated landscapes (``flagopt/workloads/landscapes.yaml``: drift by launch
index, run noise, OOM regions, flaky infrastructure) and on held-out random landscapes this project does not ship
(``benchmarks/_random_landscapes.py``: families rand-win, rand-below, rand-null, and rand-recipe when named,
one landscape per seed); flagopt runs as the real ``StudyRunner`` on :class:`SimExecutor`. Seeds run in parallel (``--jobs`` processes, sqlite on
/dev/shm). Prints rich tables and, with ``--out``, writes the markdown write-up.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import multiprocessing
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``flagopt`` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from benchmarks._baselines import (  # noqa: E402
    Choice,
    manual_protocol,
    optuna_search,
    skopt_search,
    tpe_with_repeats,
)
from benchmarks._flagopt_run import run_flagopt  # noqa: E402
from benchmarks._metrics import SeedResult, check_targets, is_flagopt, repeated_failures, summarise  # noqa: E402
from benchmarks._named_landscapes import NULL_LANDSCAPES, add_landscape_arguments, named_landscapes  # noqa: E402
from benchmarks._random_landscapes import CHOICES, FAMILIES, random_landscape  # noqa: E402
from benchmarks.pooled import load as load_results  # noqa: E402
from benchmarks._write import SHIPPED, markdown, rich_tables, write_markdown  # noqa: E402
from benchmarks._spaces import write_space  # noqa: E402
from flagopt.errors import SpaceError  # noqa: E402
from flagopt.space import StopSpec  # noqa: E402
from flagopt.workloads.sim import LANDSCAPES as SHIPPED_FILE, Landscape, load_landscape  # noqa: E402
from flagopt.space import render_value  # noqa: E402

STRATEGIES = ("flagopt", "flagopt-eq", "flagopt-1.5x", "flagopt-told", "manual", "manual-x3", "random", "tpe",
              "tpe-repeats", "skopt")
REPO = Path(__file__).resolve().parent.parent
#: Workers start fresh (no fork of a process whose progress thread may hold a lock).
SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Task:
    """One seed of one landscape (shipped: ``name``; held-out: ``family``), every chosen strategy."""

    name: str
    seed: int
    family: str = ""
    strategies: tuple[str, ...] = STRATEGIES
    max_trials: int = 60
    space_options: dict[str, Any] = field(default_factory=dict)
    landscape_file: str = ""  # where ``name`` is read from ("" = the shipped landscapes file)


def _result(land: Landscape, task: Task, strategy: str, choice: Choice, best: float, elapsed: float) -> SeedResult:
    # the pick's settings, for benchmarks/misses.py to read what a miss lacks
    detail = {k: v for k, v in choice.detail.items() if k not in ("log", "faults")} \
        | {"elapsed_s": elapsed, "settings": dict(choice.settings)}
    log = choice.detail.get("log") or []
    ci = choice.detail.get("ci")
    if is_flagopt(strategy):
        recommends = bool(choice.detail.get("winner"))
        controls = sum(1 for r in log if r.control)
    else:
        recommends = bool(choice.settings)
        controls = sum(1 for r in log if r.control) if strategy == "tpe-repeats" else None
    return SeedResult(land.name, strategy, task.seed, choice.runs, land.true_gain(choice.settings), best,
                      choice.claimed_gain, verdict=choice.detail.get("verdict") if is_flagopt(strategy) else None,
                      recommends=recommends, detail=detail, run_seconds=float(choice.detail.get("run_seconds", 0.0)),
                      controls=controls, ci=tuple(ci) if ci else None, repeated_failures=repeated_failures(land, log),
                      family=task.family)


def told_space(land: Landscape) -> dict[str, Any] | None:
    """Space options with ``land``'s true best as the one profile and no params (``None``: the best is deployed).

    Example:
        >>> told_space(load_landscape("win10"))["profiles"]["true-best"]["env"]
        {'NCCL_ALGO': 'Tree'}
    """
    deployed = land.resolve({})
    sets: dict[str, dict[str, Any]] = {"xla": {}, "env": {}, "args": {}}
    for name, value in land.best().settings.items():
        if value is not None and value != deployed.get(name):
            target = land.params[name].target
            sets[target][name] = render_value(value) if target == "env" else value
    if not any(sets.values()):
        return None
    return {"params": {}, "profiles": {"true-best": {k: v for k, v in sets.items() if v}}}


def run_task(task: Task, scratch: str) -> tuple[list[SeedResult], list[str]]:
    """Every strategy of ``task`` once; the others get the runs flagopt used (``max_trials`` without flagopt).

    Returns the results and notes (a strategy skipped, and why).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    folder = Path(tempfile.mkdtemp(prefix=f"{task.family or task.name}-{task.seed}-", dir=scratch))
    land = random_landscape(task.family, task.seed, folder) if task.family \
        else load_landscape(task.name, task.landscape_file or SHIPPED_FILE)
    best = land.best().gain
    out: list[SeedResult] = []
    notes: list[str] = []
    budget = task.max_trials
    if "flagopt" in task.strategies:
        started = time.perf_counter()
        ours = run_flagopt(land, task.seed, folder / "flagopt", max_trials=task.max_trials,
                           space_options=task.space_options or None)
        out.append(_result(land, task, "flagopt", ours, best, time.perf_counter() - started))
        budget = ours.runs
    manual = functools.cache(lambda: manual_protocol(land, task.seed))  # the protocol once, whoever needs it
    for strategy in task.strategies:
        if strategy == "flagopt":
            continue
        started = time.perf_counter()
        if strategy == "manual":
            choice: Choice | None = manual()
        elif strategy in ("flagopt-eq", "flagopt-1.5x"):
            # flagopt held to the engineer's budget (or half as much again): stop.max_trials from the manual
            # protocol's launches on this seed
            factor = 1.5 if strategy == "flagopt-1.5x" else 1.0
            choice = run_flagopt(land, task.seed, folder / strategy, max_trials=math.ceil(factor * manual().runs),
                                 space_options=task.space_options or None)
        elif strategy == "flagopt-told":
            # flagopt told the answer: its space is the true best configuration as its one profile and no params,
            # so every run after the controls confirms the winner. What confirmation alone costs in runs and
            # yields in win verdicts, a bound for any study that must first find the winner.
            told = told_space(land)
            if told is None:
                notes.append(f"flagopt-told skipped on {land.name}: its true best is the deployed job")
                continue
            choice = run_flagopt(land, task.seed, folder / strategy, max_trials=task.max_trials,
                                 space_options={**task.space_options, **told})
        elif strategy == "manual-x3":
            choice = manual_protocol(land, task.seed, repeats=3)
        elif strategy in ("random", "tpe"):
            choice = optuna_search(land, task.seed, budget, strategy)
        elif strategy == "tpe-repeats":
            choice = tpe_with_repeats(land, task.seed, budget)
        else:
            choice = skopt_search(land, task.seed, budget)
            if choice is None:
                notes.append("skopt skipped: scikit-optimize is not installed (pip install -e '.[bench]')")
                continue
        out.append(_result(land, task, strategy, choice, best, time.perf_counter() - started))
    return out, notes


def cpu_per_strategy(results: Sequence[SeedResult], strategies: Sequence[str]) -> str:
    """Seconds each strategy took in its worker, summed over seeds (where a faster benchmark must cut)."""
    spent = {s: sum(r.detail.get("elapsed_s", 0.0) for r in results if r.strategy == s) for s in strategies}
    return ", ".join(f"{s} {v:.0f}" for s, v in spent.items())


def joined(results: list[SeedResult], strategies: tuple[str, ...], added: Sequence[SeedResult],
           ) -> tuple[list[SeedResult], tuple[str, ...]]:
    """This run's results with ``added`` (``--add-results``), and every strategy among them."""
    names = {r.strategy for r in added} | set(strategies)
    return [*results, *added], tuple(s for s in STRATEGIES if s in names)


def refuse_twice(tasks: Sequence[Task], added: Sequence[SeedResult]) -> None:
    """``SystemExit`` before any study runs when ``added`` holds a strategy, landscape and seed ``tasks`` run too: two
    measurements of one study would count it twice."""
    planned = {(s, t.family or t.name, t.seed) for t in tasks for s in t.strategies}
    for r in added:
        if (r.strategy, r.family or r.landscape, r.seed) in planned:
            raise SystemExit(f"--add-results: {r.strategy} on {r.family or r.landscape} seed {r.seed} was also run "
                             "now: add results of other strategies or seeds")


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = platform.processor() or "cpu"
    return f"{platform.machine()} {platform.system()} {platform.release()}, {cores} cores ({cpu})"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


#: The keys of the space's ``stop:`` section ``--stop`` may set (``max_trials`` has its own option).
STOP_KEYS = tuple(f.name for f in fields(StopSpec) if f.name != "max_trials")


def stop_option(text: str) -> tuple[str, float]:
    """``--stop`` ``KEY=VALUE``: a key of the space's ``stop:`` section and its number, for every flagopt strategy.

    Example:
        >>> stop_option("refine=10")
        ('refine', 10)
    """
    key, sep, value = text.partition("=")
    if not sep or key not in STOP_KEYS:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE with KEY one of {', '.join(STOP_KEYS)} "
                                         "(e.g. refine=10; the budget is --max-trials)")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number") from None
    return key, int(number) if number.is_integer() else number


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds per shipped landscape (default 30)")
    parser.add_argument("--first-seed", type=int, default=0)
    add_landscape_arguments(parser, "all", "held-out jobs: each is a shipped landscape's peer, its targets set by its "
                                           "true best")
    parser.add_argument("--families", nargs="*", default=None, choices=CHOICES,
                        help=f"held-out random families (default: {' '.join(FAMILIES)}, none with --landscape-file; "
                             "none with an empty list; "
                             "a name ending -flaky: the same landscapes on flaky infrastructure)")
    parser.add_argument("--held-out-seeds", type=int, default=None,
                        help="landscapes (= seeds) per held-out family (default: --seeds)")
    parser.add_argument("--null-seeds", type=int, default=None,
                        help="seeds for null and rand-null (the null target needs >= 50; default: --seeds)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--max-trials", type=int, default=60, help="flagopt's stop.max_trials (default 60)")
    parser.add_argument("--stop", nargs="+", default=[], metavar="KEY=VALUE", type=stop_option,
                        help="stop rules of flagopt's space other than the defaults, e.g. refine=0 (end at the "
                             f"first confirmed winner); keys: {', '.join(STOP_KEYS)}")
    parser.add_argument("--jobs", type=int, default=2, help="seeds run in parallel (processes, default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="flagopt alone, 3 seeds, shipped landscapes only (unless given explicitly)")
    parser.add_argument("--out", type=Path, help="write the markdown write-up here")
    parser.add_argument("--json", type=Path, help="write every seed's result (choice, verdict, runs, claim) here")
    parser.add_argument("--add-results", nargs="+", type=Path, default=[], metavar="FILE",
                        help="results an earlier run saved with --json (other strategies, or one benchmark split "
                             "across machines) join this run's in the tables and the write-up")
    args = parser.parse_args(argv)
    given = set(sys.argv[1:] if argv is None else argv)
    if args.quick:
        if "--strategies" not in given:
            args.strategies = ["flagopt"]
        if "--seeds" not in given:
            args.seeds = 3
        if "--families" not in given:
            args.families = []
    try:
        args.landscapes, args.null_landscapes = named_landscapes(args.landscape_file, args.landscapes)
    except ValueError as exc:
        parser.error(str(exc))
    if args.families is None:  # your own landscapes alone, unless families are named too
        args.families = [] if args.landscape_file else list(FAMILIES)
    args.held_out_seeds = args.seeds if args.held_out_seeds is None else args.held_out_seeds
    args.null_seeds = args.seeds if args.null_seeds is None else args.null_seeds
    if args.jobs < 1:
        parser.error(f"--jobs: must be at least 1, got {args.jobs}")
    if args.stop:
        # flagopt's own loader judges the values (refine=-1, max_null=0) once, before any study starts: otherwise
        # every study would fail on them and be left out
        with tempfile.TemporaryDirectory() as scratch:
            try:
                write_space(load_landscape("win10"), 0, Path(scratch), stop=dict(args.stop))
            except SpaceError as exc:
                parser.error(f"--stop: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    console = Console() if sys.stdout.isatty() else Console(width=260)
    strategies = tuple(s for s in STRATEGIES if s in args.strategies)
    added = load_results(args.add_results) if args.add_results else []  # a bad file stops us before the hour's run
    count = {name: args.null_seeds if name in args.null_landscapes else args.seeds for name in args.landscapes}
    count |= {family: args.null_seeds if family in NULL_LANDSCAPES else args.held_out_seeds
              for family in args.families}
    options = {"stop": dict(args.stop)} if args.stop else {}
    where = str(args.landscape_file or "")
    tasks = [Task(name, seed, "", strategies, args.max_trials, options, where) for name in args.landscapes
             for seed in range(args.first_seed, args.first_seed + count[name])]
    tasks += [Task(family, seed, family, strategies, args.max_trials, options) for family in args.families
              for seed in range(args.first_seed, args.first_seed + count[family])]
    refuse_twice(tasks, added)
    results: list[SeedResult] = []
    notes: set[str] = set()
    started = time.time()
    scratch_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # sqlite on tmpfs: no fsync cost
    with tempfile.TemporaryDirectory(prefix="flagopt-bench-", dir=scratch_root) as scratch, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console) as bar, ProcessPoolExecutor(max_workers=args.jobs, mp_context=SPAWN) as pool:
        progress = bar.add_task("studies", total=len(tasks))
        futures = {pool.submit(run_task, task, scratch): task for task in tasks}
        done_per: dict[str, int] = {}
        for future in as_completed(futures):
            task = futures[future]
            try:
                got, said = future.result()
            except Exception as exc:  # one broken task must not lose an hour of results: say it, count it out
                notes.add(f"{task.name} seed {task.seed} failed and is left out: {type(exc).__name__}: {exc}")
                console.print(f"[red]{task.name} seed {task.seed} failed: {exc}[/red]")
                got, said = [], set()
            results.extend(got)
            notes.update(said)
            bar.update(progress, advance=1, description=f"{task.name} seed {task.seed}")
            done_per[task.name] = done_per.get(task.name, 0) + 1
            expected = count[task.name]
            if not console.is_terminal and done_per[task.name] == expected:  # no live bar in a log
                console.print(f"{task.name}: {expected} seeds done at {time.time() - started:.0f} s")
    wall = time.time() - started
    results, strategies = joined(results, strategies, added)
    order = {name: i for i, name in enumerate([*args.landscapes, *args.families])}
    results.sort(key=lambda r: (order.get(r.family or r.landscape, len(order)), strategies.index(r.strategy), r.seed))
    shipped = [r for r in results if not r.family]
    held_out = [r for r in results if r.family]
    checks = check_targets(shipped) if "flagopt" in strategies else []
    held_checks = check_targets(held_out, by_family=True) if "flagopt" in strategies and held_out else []
    for note in sorted(notes):
        console.print(f"[yellow]{note}[/yellow]")
    source = f"landscapes of {args.landscape_file}" if args.landscape_file else SHIPPED
    for table in rich_tables(summarise(shipped), summarise(held_out, by_family=True), checks, held_checks,
                             source=source):
        console.print(table)
    studies = len({(r.landscape, r.seed) for r in results})
    console.print(f"wall time {wall:.0f} s ({studies} landscape-seeds, {len(results)} strategy runs, "
                  f"--jobs {args.jobs}); CPU seconds per strategy: {cpu_per_strategy(results, strategies)}")
    if args.json:
        rows = [{**{k: v for k, v in asdict(r).items() if k != "detail"}, "within_1pct": r.within_1pct,
                 "detail": {k: v for k, v in r.detail.items() if isinstance(v, (int, float, str, bool, list, dict))}}
                for r in results]
        args.json.write_text(json.dumps(rows, default=str))
    if args.out:
        shown = ["python", "benchmarks/decisions.py", *(sys.argv[1:] if argv is None else argv)]
        meta = {"command": shlex.join(shown), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(),
                "wall": f"{wall:.0f} s ({studies} landscape-seeds, --jobs {args.jobs}; seconds per strategy: "
                        f"{cpu_per_strategy(results, strategies)})",
                "commit": commit(), "versions": f"python {platform.python_version()}, optuna {optuna.__version__}"}
        descriptions = {name: load_landscape(name, args.landscape_file or SHIPPED_FILE).description
                        for name in args.landscapes}
        write_markdown(args.out, lambda previous: markdown(
            summarise(shipped), summarise(held_out, by_family=True), checks, held_checks, meta, descriptions,
            sorted(notes), previous, source=source,
            **({"file": str(args.landscape_file)} if args.landscape_file else {})))
        console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
