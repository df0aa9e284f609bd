"""Benchmark one study on 1, 2 and 4 slots: wall time to decision and decision quality (issue 15).

Usage:
    python benchmarks/slots.py --seeds 30 --null-seeds 50 --jobs 2 [--landscapes win10 null] [--families rand-win]
                               [--slots 1 2 4] [--offsets even alt slow-first] [--out docs/benchmark-slots.md]
    python benchmarks/slots.py --quick          # 3 seeds, win10 null rand-win: for iteration
    python benchmarks/slots.py --landscape-file benchmarks/stress_landscapes.yaml --cells 1 2:alt 4:alt  # held-out shapes

Each cell is the real ``StudyRunner`` on :class:`SimExecutor` with ``N`` slots on a virtual clock: every launch
holds its slot for one *run length* (60 virtual seconds), slots run side by side, and the wall time to decision is
the virtual time until the stop verdict (jobs still running then included). The same landscapes and seeds run with
one slot (the reference) and with 2 and 4 slots under each slot offset:

* ``even`` — identical slots (no speed offset, the same place on the drift curve): the control;
* ``alt`` — slots alternate speed 1.00 / ``--slow`` (slot0 fast) and each slot sits ``--phase-step`` launches
  further along the drift curve than the one before (its own drift);
* ``slow-first`` — the same with slot0 slow: slot0 runs the first baseline, the deployed environment's effect and
  the first sampled configurations, so the slower slot is the one that measures a configuration first.

Decision quality is scored against the landscape's truth (``benchmarks/_metrics.py``): within 1 % of the true
best, and false winners (a recommended configuration whose true gain is below 2 %, a claim of >= +5 % on a
landscape without a +5 % configuration, any claim on a null landscape). Every false winner is listed with the
speeds of the slots its runs came from, so one that a slot offset caused shows. Seeds run in parallel
(``--jobs`` processes, sqlite on /dev/shm); rich tables on the terminal and, with ``--out``, a markdown write-up.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shlex
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``flagopt`` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import optuna  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks._flagopt_run import run_flagopt  # noqa: E402
from benchmarks._metrics import SeedResult, TargetCheck  # noqa: E402
from benchmarks._random_landscapes import CHOICES, random_landscape  # noqa: E402
from benchmarks._write import kept_notes, markdown_table, sectioned_table, write_markdown  # noqa: E402
from benchmarks._named_landscapes import NULL_LANDSCAPES, add_landscape_arguments, named_landscapes  # noqa: E402
from benchmarks.decisions import SPAWN, commit, machine  # noqa: E402
from flagopt.workloads.sim import LANDSCAPES as SHIPPED_FILE, load_landscape  # noqa: E402

DEFAULT_LANDSCAPES = ("win10", "fsdp64", "pp64", "null")
DEFAULT_FAMILIES = ("rand-win", "rand-null")
OFFSETS = ("even", "alt", "slow-first")
#: The one-slot reference has no offset to speak of (a speed factor on every run cancels out).
ONE = "one"
#: Issue 15's target: the most slots reach the one-slot decision quality in at most this share of its wall time.
WALL_TARGET = 0.35
#: "The same decision quality": the shares within 1 % of the true best and decided at most this far below one slot's.
QUALITY_SLACK = 0.05
#: Virtual seconds a launch holds its slot (``SimExecutor.period_s``): the unit of wall time in the tables.
RUN_LENGTH_S = 60.0


def slot_names(slots: int) -> list[str]:
    """The names ``run_flagopt`` gives ``slots`` slots."""
    return [f"slot{i}" for i in range(slots)] if slots > 1 else [""]


def offsets_of(offset: str, slots: int, slow: float, phase_step: float) -> tuple[dict[str, float], dict[str, float]]:
    """Per-slot speed factors and drift phases (in launches) of an offset pattern.

    Example:
        >>> offsets_of("slow-first", 2, 0.97, 7.0)
        ({'slot0': 0.97, 'slot1': 1.0}, {'slot0': 0.0, 'slot1': 7.0})
        >>> offsets_of("even", 4, 0.97, 7.0)
        ({}, {})
    """
    if offset in (ONE, "even") or slots == 1:
        return {}, {}
    names = slot_names(slots)
    slow_parity = 0 if offset == "slow-first" else 1
    speed = {name: (slow if i % 2 == slow_parity else 1.0) for i, name in enumerate(names)}
    phase = {name: i * phase_step for i, name in enumerate(names)}
    return speed, phase


@dataclass(frozen=True)
class Task:
    """One seed of one landscape (shipped: ``name``; held-out: ``family``) on ``slots`` slots with ``offset``."""

    name: str
    seed: int
    slots: int
    offset: str
    family: str = ""
    max_trials: int | None = None
    slow: float = 0.97
    phase_step: float = 7.0
    landscape_file: str = ""  # where ``name`` is read from ("" = the shipped landscapes file)


@dataclass(frozen=True)
class SlotResult:
    """One study: its score against the truth and where its time and evidence went."""

    result: SeedResult
    slots: int
    offset: str
    wall_seconds: float
    winner_speeds: tuple[float, ...]  # the speed factor of the slot of each successful run of the winner
    winner_slots: tuple[str, ...]
    launches_per_slot: tuple[int, ...]

    @property
    def key(self) -> str:
        return self.result.family or self.result.landscape

    @property
    def false_winner(self) -> bool:
        """A recommendation truly below +2 %, a +5 % claim where no +5 % exists, any claim on a null landscape."""
        r = self.result
        return r.false_winner or (r.kind != "win" and r.claims_win) or (r.kind == "null" and r.claims)

    @property
    def decided(self) -> bool:
        """The study reached a win or null verdict before its budget."""
        return self.result.verdict in ("win", "null")

    @property
    def confirmed_elsewhere(self) -> bool | None:
        """The winner's runs came from more than one slot (``None`` without a winner or with one slot)."""
        if not self.result.claims or self.slots == 1:
            return None
        return len(set(self.winner_slots)) > 1


def run_task(task: Task, scratch: str) -> SlotResult:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    folder = Path(tempfile.mkdtemp(prefix=f"{task.family or task.name}-{task.seed}-{task.slots}-{task.offset}-",
                                   dir=scratch))
    land = random_landscape(task.family, task.seed, folder) if task.family \
        else load_landscape(task.name, task.landscape_file or SHIPPED_FILE)
    speed, phase = offsets_of(task.offset, task.slots, task.slow, task.phase_step)
    started = time.perf_counter()
    choice = run_flagopt(land, task.seed, folder / "flagopt", max_trials=task.max_trials, slots=task.slots,
                         slot_speed=speed or None, slot_phase=phase or None)
    detail = choice.detail
    log = detail.get("log") or []
    ci = detail.get("ci")
    result = SeedResult(land.name, f"{task.slots} slot{'s' if task.slots > 1 else ''}", task.seed, choice.runs,
                        land.true_gain(choice.settings), land.best().gain, choice.claimed_gain,
                        verdict=detail.get("verdict"), recommends=bool(detail.get("winner")),
                        detail={"elapsed_s": time.perf_counter() - started, "winner": detail.get("winner")},
                        run_seconds=float(detail.get("run_seconds", 0.0)),
                        controls=sum(1 for r in log if r.control), ci=tuple(ci) if ci else None, family=task.family)
    names = slot_names(task.slots)
    launched = list(detail.get("slot_launches") or [])
    winner_slots = tuple(detail.get("winner_slots") or ())
    return SlotResult(result, task.slots, task.offset, float(detail["wall_seconds"]),
                      tuple(speed.get(s, 1.0) for s in winner_slots), winner_slots,
                      tuple(launched.count(name) for name in names))


@dataclass(frozen=True)
class SlotSummary:
    """One (landscape, slots, offset) cell over its seeds."""

    key: str
    slots: int
    offset: str
    seeds: int
    kind: str
    best_gain: float
    wall: tuple[float, float, float]  # median, q25, q75 in run lengths
    ratio: float | None  # median wall / the one-slot median wall
    paired_ratio: float | None  # median over seeds of wall / the same seed's one-slot wall
    runs: tuple[float, float, float]
    verdicts: dict[str, int]
    decided: float
    within_1pct: float
    false_winners: int
    controls: float | None
    confirmed_elsewhere: tuple[int, int]  # claims whose runs span several slots, claims
    busy: float  # launches over slots x wall in run lengths (1.0: no slot ever idle), median over seeds
    regret_mean: float


def _iqr(values: Sequence[float]) -> tuple[float, float, float]:
    a = np.asarray(values, dtype=float)
    return float(np.median(a)), float(np.percentile(a, 25)), float(np.percentile(a, 75))


def summarise(results: Sequence[SlotResult]) -> list[SlotSummary]:
    """One summary per (landscape or family, slots, offset), in first-seen order; ratios against the one-slot cell."""
    groups: dict[tuple[str, int, str], list[SlotResult]] = {}
    for r in results:
        groups.setdefault((r.key, r.slots, r.offset), []).append(r)
    one_wall = {key: {r.result.seed: r.wall_seconds for r in rs} for (key, slots, _), rs in groups.items()
                if slots == 1}
    out = []
    for (key, slots, offset), rs in groups.items():
        wall = _iqr([r.wall_seconds / RUN_LENGTH_S for r in rs])
        reference = one_wall.get(key, {})
        ratio = paired = None
        if reference:
            ratio = wall[0] / (float(np.median(list(reference.values()))) / RUN_LENGTH_S)
            pairs = [r.wall_seconds / reference[r.result.seed] for r in rs if reference.get(r.result.seed)]
            paired = float(np.median(pairs)) if pairs else None
        verdicts: dict[str, int] = {}
        for r in rs:
            verdicts[r.result.verdict or "none"] = verdicts.get(r.result.verdict or "none", 0) + 1
        shares = [r.result.controls_share for r in rs if r.result.controls_share is not None]
        spread = [r.confirmed_elsewhere for r in rs if r.confirmed_elsewhere is not None]
        busy = [r.result.runs / (r.slots * r.wall_seconds / RUN_LENGTH_S) for r in rs if r.wall_seconds > 0]
        out.append(SlotSummary(
            key, slots, offset, len(rs), rs[0].result.kind, rs[0].result.best_gain, wall, ratio, paired,
            _iqr([r.result.runs for r in rs]), verdicts, float(np.mean([r.decided for r in rs])),
            float(np.mean([r.result.within_1pct for r in rs])), sum(r.false_winner for r in rs),
            float(np.median(shares)) if shares else None, (sum(spread), len(spread)),
            float(np.median(busy)) if busy else 0.0, float(np.mean([r.result.regret for r in rs]))))
    return out


def check_targets(summaries: Sequence[SlotSummary]) -> list[TargetCheck]:
    """Issue 15's target per landscape and offset at the most slots, and the false winners an offset adds."""
    one = {s.key: s for s in summaries if s.slots == 1}
    most = max((s.slots for s in summaries), default=1)
    even = {(s.key, s.slots): s for s in summaries if s.offset == "even"}
    out = []
    for s in summaries:
        ref = one.get(s.key)
        if s.slots == 1 or ref is None:
            continue
        if s.slots == most:
            out.append(TargetCheck(f"{s.key}, {s.slots} slots {s.offset}: wall time to decision",
                                   f"<= {WALL_TARGET:.0%} of 1 slot's", f"{s.ratio:.0%}",
                                   s.ratio is not None and s.ratio <= WALL_TARGET))
            same = s.within_1pct >= ref.within_1pct - QUALITY_SLACK and s.decided >= ref.decided - QUALITY_SLACK \
                and s.false_winners / s.seeds <= ref.false_winners / ref.seeds
            out.append(TargetCheck(
                f"{s.key}, {s.slots} slots {s.offset}: decision quality",
                f"1 slot's (-{QUALITY_SLACK:.0%}): within 1 % {ref.within_1pct:.0%}, decided {ref.decided:.0%}; "
                f"false winners {ref.false_winners}/{ref.seeds}",
                f"within 1 % {s.within_1pct:.0%}, decided {s.decided:.0%}; false winners {s.false_winners}/{s.seeds}",
                same))
        control = even.get((s.key, s.slots))
        if s.offset != "even" and control is not None:
            out.append(TargetCheck(f"{s.key}, {s.slots} slots {s.offset}: false winners beyond identical slots'",
                                   f"<= {control.false_winners}/{control.seeds} (even)",
                                   f"{s.false_winners}/{s.seeds}",
                                   s.false_winners / s.seeds <= control.false_winners / control.seeds))
    return out


COLUMNS = ("landscape", "slots", "offsets", "seeds", "true best", "wall (median [IQR])", "vs 1 slot (paired)",
           "runs (median [IQR])", "slots busy", "verdicts", "decided", "within 1 %", "regret (mean)",
           "false winners", "controls", "winner on >= 2 slots")
_LEFT = ("landscape", "offsets", "verdicts")


def rows(summaries: Sequence[SlotSummary]) -> list[tuple[str, ...]]:
    out = []
    for s in summaries:
        ratio = "-" if s.ratio is None else f"{s.ratio:.2f}" + ("" if s.paired_ratio is None else
                                                                 f" ({s.paired_ratio:.2f})")
        spread, claims = s.confirmed_elsewhere
        out.append((s.key, str(s.slots), s.offset, str(s.seeds), f"{100 * s.best_gain:+.1f} % ({s.kind})",
                    f"{s.wall[0]:.4g} [{s.wall[1]:.4g}-{s.wall[2]:.4g}]", ratio,
                    f"{s.runs[0]:.4g} [{s.runs[1]:.4g}-{s.runs[2]:.4g}]", f"{s.busy:.0%}",
                    ", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items())), f"{s.decided:.0%}",
                    f"{s.within_1pct:.0%}", f"{100 * s.regret_mean:.2f} pp",
                    f"{s.false_winners} ({s.false_winners / s.seeds:.0%})",
                    "-" if s.controls is None else f"{s.controls:.0%}",
                    "-" if s.slots == 1 or not claims else f"{spread}/{claims}"))
    return out


def false_winner_lines(results: Sequence[SlotResult]) -> list[str]:
    """Every false winner: where, what it claimed against the truth, and the speeds of the slots behind it."""
    out = []
    for r in results:
        if not r.false_winner:
            continue
        x = r.result
        where = ", ".join(f"{slot or 'the slot'} ({speed:.2f})" for slot, speed in zip(r.winner_slots, r.winner_speeds))
        speeds = set(r.winner_speeds)
        if r.slots == 1 or r.offset == "even":
            source = ""
        elif speeds == {1.0}:
            source = "; all on fast slots"
        else:
            source = "; all on slow slots" if 1.0 not in speeds else "; on fast and slow slots"
        out.append(f"{r.key} seed {x.seed}, {r.slots} slot(s) {r.offset}: {x.verdict} verdict, claimed "
                   f"{100 * x.claimed_gain:+.1f} % for a true {100 * x.true_gain:+.1f} % "
                   f"(`{x.detail.get('winner')}`); winner's runs on {where or '-'}{source}")
    return out


def rich_table(title: str, summaries: Sequence[SlotSummary]) -> Table:
    return sectioned_table(title, COLUMNS, _LEFT, rows(summaries))


def targets_table(checks: Sequence[TargetCheck]) -> Table:
    table = Table(title="Targets (issue 15)")
    for col in ("target", "wanted", "measured", "met"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.name, c.target, c.measured, "[green]yes[/green]" if c.met else "[red]no[/red]")
    return table


METHOD_TEXT = (
    "Every cell is the real `StudyRunner` (default sampler, noise and stop settings: win 0.05, null_gain 0.02, "
    "max_null 25, max_trials as in the command, else the default budget: 60 runs on one slot and 10 more per further slot) on `SimExecutor` with N slots on a virtual clock: each launch holds "
    "its slot for one **run length** (60 virtual seconds; multiply by a real job's length, e.g. 10 minutes), the "
    "slots run side by side and the planner fills every free slot. **wall** is the virtual time from the first "
    "launch to the stop verdict in run lengths (a win or null verdict cancels the runs other slots still have in flight; a budget verdict waits for them). The same landscape "
    "and seed run once with one slot and once per slot count and offset pattern. Offsets: **even** — identical "
    "slots (the control); **alt** — slots alternate speed 1.00 / {slow:.2f} (slot0 fast) and slot i sits "
    "{phase:g} launches further along the landscape's drift curve (a slot's own drift level and phase); "
    "**slow-first** — the same with slot0 slow: slot0 runs the first baseline, the deployed environment's effect "
    "and the first sampled configurations, so the slower slot measures a configuration first."
)
METRIC_TEXT = (
    "vs 1 slot: this cell's median wall over the one-slot median wall (in brackets: the median over seeds of "
    "the ratio to the same seed's one-slot wall). runs: launches until the decision. slots busy: launches over slots "
    "x wall (median; 100 % when no slot ever waits). verdicts: the stop reasons "
    "(win, null, budget). decided: share of win or null verdicts. within 1 %: the choice's true throughput is at "
    "least 99 % of the true best's. regret: true best gain minus the choice's true gain, mean. false winners: "
    "studies that recommend a configuration truly below +2 %, claim "
    ">= +5 % on a landscape without a +5 % configuration, or claim anything on a null landscape. controls: "
    "baseline runs over all launches (median). winner on >= 2 slots: claims whose successful runs came from more "
    "than one slot. Decision quality is the same as one slot's when the shares within 1 % and decided are at most "
    "{slack:.0%} below its own and the false-winner share is not above it."
)


def markdown(summaries: Sequence[SlotSummary], checks: Sequence[TargetCheck], false_lines: Sequence[str],
             same: Sequence[str], meta: dict[str, str], previous: str = "") -> str:
    parts = [
        "# Benchmark: one study on 1, 2 and 4 slots (issue 15)",
        "Generated by `benchmarks/slots.py` (see `benchmarks/README.md`); the numbers below are rewritten on every "
        "run, the notes section is kept.",
        "## How it was run",
        markdown_table(("", ""), [(k, v) for k, v in meta.items()]),
        "## Method",
        METHOD_TEXT.format(slow=float(meta.get("slow", 0.97)), phase=float(meta.get("phase step", 7.0))),
        "## Results",
        markdown_table(COLUMNS, rows(summaries)),
        METRIC_TEXT.format(slack=QUALITY_SLACK),
        "## Targets",
        markdown_table(("target", "wanted", "measured", "met"),
                       [(c.name, c.target, c.measured, "yes" if c.met else "**no**") for c in checks]),
        "## Which slot is slow",
        "\n".join(f"* {line}" for line in same) if same else "Not measured (needs the alt and slow-first offsets).",
        "## Every false winner",
        "\n".join(f"* {line}" for line in false_lines) if false_lines else "None.",
        "## Notes",
        kept_notes(previous),
        "",
    ]
    return "\n\n".join(parts)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds per shipped landscape (default 30)")
    parser.add_argument("--first-seed", type=int, default=0)
    add_landscape_arguments(parser, " ".join(DEFAULT_LANDSCAPES),
                            "e.g. benchmarks/stress_landscapes.yaml; no families unless named")
    parser.add_argument("--families", nargs="*", default=None, choices=CHOICES,
                        help=f"held-out families (default: {' '.join(DEFAULT_FAMILIES)}; none with an empty list)")
    parser.add_argument("--held-out-seeds", type=int, default=None, help="landscapes per family (default: --seeds)")
    parser.add_argument("--null-seeds", type=int, default=None, help="seeds for null and rand-null (default: --seeds)")
    parser.add_argument("--slots", nargs="+", type=int, default=[1, 2, 4], help="slot counts (default 1 2 4)")
    parser.add_argument("--offsets", nargs="+", default=list(OFFSETS), choices=OFFSETS,
                        help="offset patterns for more than one slot (default: all)")
    parser.add_argument("--cells", nargs="+", default=None, metavar="SLOTS[:OFFSET]",
                        help="the cells to run instead of every --slots x --offsets, e.g. 1 2:alt 4:even 4:alt")
    parser.add_argument("--slow", type=float, default=0.97, help="the slow slots' speed factor (default 0.97)")
    parser.add_argument("--phase-step", type=float, default=7.0,
                        help="drift phase between neighbouring slots, in launches (default 7)")
    parser.add_argument("--max-trials", type=int, default=None,
                        help="flagopt's stop.max_trials (default: unset, the budget grows with the slots)")
    parser.add_argument("--jobs", type=int, default=2, help="studies run in parallel (processes, default 2)")
    parser.add_argument("--quick", action="store_true", help="3 seeds of win10, null and rand-win (unless given)")
    parser.add_argument("--out", type=Path, help="write the markdown write-up here")
    parser.add_argument("--results", type=Path,
                        help="also write every study's result here (JSON; --from-results renders it again)")
    parser.add_argument("--from-results", type=Path, nargs="+",
                        help="render --results files (several: one write-up of all) instead of running studies")
    args = parser.parse_args(argv)
    given = set(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.seeds = args.seeds if "--seeds" in given else 3
        args.landscapes = args.landscapes if "--landscapes" in given else ["win10", "null"]
        args.families = args.families if "--families" in given else ["rand-win"]
    if args.landscapes is None and args.landscape_file is None:
        args.landscapes = list(DEFAULT_LANDSCAPES)
    try:
        args.landscapes, args.null_landscapes = named_landscapes(args.landscape_file, args.landscapes)
    except ValueError as exc:
        parser.error(str(exc))
    if args.families is None:  # a file's landscapes alone, unless families are named too
        args.families = [] if args.landscape_file else list(DEFAULT_FAMILIES)
    args.held_out_seeds = args.seeds if args.held_out_seeds is None else args.held_out_seeds
    args.null_seeds = args.seeds if args.null_seeds is None else args.null_seeds
    args.slots = sorted(set(args.slots))
    if args.cells is None:
        args.cells = [(1, ONE)] + [(n, offset) for n in args.slots if n > 1 for offset in args.offsets]
    else:
        args.cells = [parse_cell(parser, text) for text in args.cells]
        args.slots = sorted({n for n, _ in args.cells})
    if args.jobs < 1:
        parser.error(f"--jobs: must be at least 1, got {args.jobs}")
    if args.slots[0] != 1:
        parser.error(f"--slots/--cells: must include 1 slot (the reference of every ratio), got {args.slots}")
    if not 0.0 < args.slow <= 1.0:
        parser.error(f"--slow: a speed factor in (0, 1], got {args.slow}")
    for name in ("seeds", "held_out_seeds", "null_seeds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: must be at least 1, got {getattr(args, name)}")
    return args


def parse_cell(parser: argparse.ArgumentParser, text: str) -> tuple[int, str]:
    """``"4:alt"`` -> ``(4, "alt")``; ``"1"`` -> ``(1, "one")``; anything else is a usage error."""
    count, _, offset = text.partition(":")
    if not count.isdigit() or int(count) < 1:
        parser.error(f"--cells: {text!r}: the slot count must be a positive integer")
    if int(count) == 1:
        if offset:
            parser.error(f"--cells: {text!r}: one slot has no offset")
        return 1, ONE
    if offset not in OFFSETS:
        parser.error(f"--cells: {text!r}: the offset must be one of {', '.join(OFFSETS)}")
    return int(count), offset


def tasks_of(args: argparse.Namespace) -> list[Task]:
    cells = args.cells
    out = []
    for name in [*args.landscapes, *args.families]:
        family = name if name in args.families else ""
        null = name in (NULL_LANDSCAPES if family else args.null_landscapes)
        count = args.null_seeds if null else args.held_out_seeds if family else args.seeds
        where = "" if family or args.landscape_file is None else str(args.landscape_file)
        for seed in range(args.first_seed, args.first_seed + count):
            out += [Task(name, seed, n, offset, family, args.max_trials, args.slow, args.phase_step, where)
                    for n, offset in cells]
    return out


def run_all(args: argparse.Namespace, console: Console) -> tuple[list[SlotResult], list[str], float]:
    """Every task of ``args`` in ``--jobs`` processes: the results, what failed, and the seconds it took."""
    tasks = tasks_of(args)
    results: list[SlotResult] = []
    failed: list[str] = []
    started = time.time()
    scratch_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # sqlite on tmpfs: no fsync cost
    with tempfile.TemporaryDirectory(prefix="flagopt-slots-", dir=scratch_root) as scratch, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console) as bar, ProcessPoolExecutor(max_workers=args.jobs, mp_context=SPAWN) as pool:
        progress = bar.add_task("studies", total=len(tasks))
        futures = {pool.submit(run_task, task, scratch): task for task in tasks}
        left = {name: sum(1 for t in tasks if t.name == name) for name in {t.name for t in tasks}}
        for future in as_completed(futures):
            task = futures[future]
            try:
                results.append(future.result())
            except Exception as exc:  # one broken study must not lose the run: say it, count it out
                failed.append(f"{task.name} seed {task.seed} on {task.slots} slots ({task.offset}) failed and is "
                              f"left out: {type(exc).__name__}: {exc}")
                console.print(f"[red]{failed[-1]}[/red]")
            bar.update(progress, advance=1, description=f"{task.name} seed {task.seed} x{task.slots} {task.offset}")
            left[task.name] -= 1
            if not console.is_terminal and not left[task.name]:  # no live bar in a log
                console.print(f"{task.name}: done at {time.time() - started:.0f} s")
    return results, failed, time.time() - started


def save_results(path: Path, results: Sequence[SlotResult], meta: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results]}))


def load_results(path: Path) -> tuple[list[SlotResult], dict[str, str]]:
    data = json.loads(path.read_text())
    out = []
    for item in data["results"]:
        seed = item.pop("result")
        seed["ci"] = tuple(seed["ci"]) if seed["ci"] else None
        seed["repeated_failures"] = tuple(seed["repeated_failures"])
        out.append(SlotResult(SeedResult(**seed), **{k: tuple(v) if isinstance(v, list) else v
                                                    for k, v in item.items()}))
    return out, data["meta"]


def merge_meta(metas: Sequence[dict[str, str]]) -> dict[str, str]:
    """One "how it was run" of several runs: a value that differs lists every run's, in order.

    Example:
        >>> merge_meta([{"command": "`a`", "slow": "0.97"}, {"command": "`b`", "slow": "0.97"}])
        {'command': '`a`<br>`b`', 'slow': '0.97'}
    """
    out: dict[str, str] = {}
    for key in dict.fromkeys(k for meta in metas for k in meta):
        values = list(dict.fromkeys(meta[key] for meta in metas if key in meta))
        out[key] = "<br>".join(values)
    return out


def same_choices(results: Sequence[SlotResult], first: str = "alt", second: str = "slow-first") -> list[str]:
    """Per slot count: on how many seeds ``first`` and ``second`` ended with the same choice, runs and wall time.

    The two patterns differ only in which slots are slow; a planner that measures gains within a slot makes the
    same decisions under both.
    """
    by = {(r.key, r.slots, r.offset, r.result.seed): r for r in results}
    counts: dict[tuple[str, int], list[int]] = {}
    for (key, slots, offset, seed), r in by.items():
        other = by.get((key, slots, second, seed))
        if offset != first or other is None:
            continue
        same = (r.result.runs, r.result.detail.get("winner"), r.wall_seconds, r.result.verdict) == \
            (other.result.runs, other.result.detail.get("winner"), other.wall_seconds, other.result.verdict)
        tally = counts.setdefault((key, slots), [0, 0])
        tally[0] += int(same)
        tally[1] += 1
    return [f"{key}, {slots} slots: {first} and {second} ended with the same verdict, choice, runs and wall time "
            f"on {same} of {total} seeds" for (key, slots), (same, total) in counts.items()]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)
    console = Console() if sys.stdout.isatty() else Console(width=260)
    shown = ["python", "benchmarks/slots.py", *(sys.argv[1:] if argv is None else argv)]
    if args.from_results:
        results, metas = [], []
        for path in args.from_results:
            got, one = load_results(path)
            results += got
            metas.append(one)
        meta = merge_meta(metas)
        failed = [meta["left out"]] if "left out" in meta else []
        meta["rendered by"] = f"`{shlex.join(shown)}`"
    else:
        results, failed, wall = run_all(args, console)
        meta = {"command": f"`{shlex.join(shown)}`",
                "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
                "wall time": f"{wall:.0f} s ({len(results)} studies, --jobs {args.jobs})", "flagopt commit": commit(),
                "versions": f"python {platform.python_version()}, optuna {optuna.__version__}",
                "slow": f"{args.slow:g}", "phase step": f"{args.phase_step:g}",
                **({"left out": "; ".join(failed)} if failed else {})}
        if args.results:
            save_results(args.results, results, meta)
    order = {name: i for i, name in enumerate(dict.fromkeys(r.key for r in results))}
    cells = {cell: i for i, cell in enumerate(sorted({(r.slots, r.offset) for r in results},
                                                     key=lambda c: (c[0], (ONE, *OFFSETS).index(c[1]))))}
    results.sort(key=lambda r: (order[r.key], cells[(r.slots, r.offset)], r.result.seed))
    summaries = summarise(results)
    checks = check_targets(summaries)
    false_lines = false_winner_lines(results)
    same = same_choices(results)
    console.print(rich_table("Wall time to decision and decision quality by slot count", summaries))
    console.print(targets_table(checks))
    for line in [*same, *false_lines, *failed]:
        console.print(line)
    cpu = sum(r.result.detail.get("elapsed_s", 0.0) for r in results)
    console.print(f"{meta['wall time']}; {cpu:.0f} s in the studies")
    if args.out:
        write_markdown(args.out, lambda previous: markdown(summaries, checks, false_lines, same, meta, previous))
        console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
