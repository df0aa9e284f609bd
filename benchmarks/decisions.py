"""Benchmark flagopt's noise-aware decisions against a manual protocol, random search and plain Optuna TPE.

Usage:
    python benchmarks/decisions.py --seeds 20 [--landscapes win10 null] [--out docs/benchmark-decisions.md]

Every strategy runs on the same simulated landscapes (``flagopt/workloads/landscapes.yaml``: drift by launch
index, run noise, OOM regions); flagopt runs as the real ``StudyRunner`` on :class:`SimExecutor`. Prints a rich
table and, with ``--out``, writes the markdown write-up.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``flagopt`` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from benchmarks._baselines import manual_protocol, optuna_search  # noqa: E402
from benchmarks._flagopt_run import run_flagopt  # noqa: E402
from benchmarks._metrics import SeedResult, check_targets, summarise  # noqa: E402
from benchmarks._write import markdown, rich_table, write_markdown  # noqa: E402
from flagopt.workloads.sim import Landscape, load_landscape  # noqa: E402

LANDSCAPES = ("win10", "fsdp64", "pp64", "h200x2", "null")
REPO = Path(__file__).resolve().parent.parent


def run_seed(land: Landscape, seed: int, max_trials: int, scratch: Path) -> list[SeedResult]:
    """Every strategy once on ``land`` with ``seed``; random and TPE get the runs flagopt used."""
    best = land.best().gain
    folder = Path(tempfile.mkdtemp(prefix=f"{land.name}-{seed}-", dir=scratch))
    ours = run_flagopt(land, seed, folder, max_trials=max_trials)
    out = [SeedResult(land.name, "flagopt", seed, ours.runs, land.true_gain(ours.settings), best, ours.claimed_gain,
                      verdict=ours.detail["verdict"], recommends=bool(ours.detail["winner"]), detail=ours.detail)]
    for strategy, choice in (("manual", manual_protocol(land, seed)),
                             ("random", optuna_search(land, seed, ours.runs, "random")),
                             ("tpe", optuna_search(land, seed, ours.runs, "tpe"))):
        out.append(SeedResult(land.name, strategy, seed, choice.runs, land.true_gain(choice.settings), best,
                              choice.claimed_gain))
    return out


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.machine()} {platform.system()} {platform.release()}, {cores} cores ({platform.processor() or 'cpu'})"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per landscape (default 20)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--landscapes", nargs="+", default=list(LANDSCAPES), choices=LANDSCAPES)
    parser.add_argument("--max-trials", type=int, default=60, help="flagopt's stop.max_trials (default 60)")
    parser.add_argument("--out", type=Path, help="write the markdown write-up here")
    args = parser.parse_args(argv)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    console = Console() if sys.stdout.isatty() else Console(width=170)
    lands = [load_landscape(name) for name in args.landscapes]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    results: list[SeedResult] = []
    started = time.time()
    scratch_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # sqlite on tmpfs: no fsync cost
    with tempfile.TemporaryDirectory(prefix="flagopt-bench-", dir=scratch_root) as scratch, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console) as bar:
        task = bar.add_task("studies", total=len(lands) * len(seeds))
        for land in lands:
            for seed in seeds:
                bar.update(task, description=f"{land.name} seed {seed}")
                results.extend(run_seed(land, seed, args.max_trials, Path(scratch)))
                bar.advance(task)
            if not console.is_terminal:  # no live bar in a log: one line per landscape
                console.print(f"{land.name}: {len(seeds)} seeds done at {time.time() - started:.0f} s")
    wall = time.time() - started
    summaries = summarise(results)
    checks = check_targets(summaries)
    for table in rich_table(summaries, checks):
        console.print(table)
    console.print(f"wall time {wall:.0f} s")
    if args.out:
        shown = ["python", "benchmarks/decisions.py", *(sys.argv[1:] if argv is None else argv)]
        meta = {"command": shlex.join(shown), "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine(), "wall": f"{wall:.0f} s ({len(results) // 4} flagopt studies)",
                "commit": commit(),
                "versions": f"python {platform.python_version()}, optuna {optuna.__version__}"}
        descriptions = {land.name: land.description for land in lands}
        write_markdown(args.out, lambda previous: markdown(summaries, checks, meta, descriptions, previous))
        console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
