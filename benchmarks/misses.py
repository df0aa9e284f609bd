"""Why each study missed the true best by more than 1 %: what its pick differs in, and the one change that repairs most.

``decisions.py --json`` keeps every pick's settings (``detail.settings``). For each study of ``--strategy`` that ended
more than 1 % below its landscape's true best, this compares the pick with the best, param by param, and reads each
difference from the landscape's noise-free model: the best's value alone on the deployed job, and the pick with that
one value changed. Each difference is one of:

- ``level``: the pick sets a numeric param (a threshold, a limit) to another level than the best's;
- ``value``: it sets a boolean or categorical param to another value than the best's;
- ``passenger``: it sets a param the best leaves at the deployed value (a setting that costs, or pays nothing);
- ``companion``: it leaves at the deployed value a param whose best value pays alone too;
- ``company``: it leaves at the deployed value a param whose best value pays nothing or costs alone, and pays beside
  the pick (no one-factor probe shows it; only a run that sets it beside the rest does).

A miss is classed by its largest repair when that one change brings the pick within 1 % of the best, else ``several``.
The sixty-fourth-session note of docs/benchmark-decisions.md classed twelve held-out misses by hand this way.

Usage::

    python benchmarks/decisions.py --strategies flagopt --first-seed 150000 --json r.json
    python benchmarks/misses.py r.json [more.json ...] [--strategy flagopt] [--landscape-file my_jobs.yaml]

Example:
    >>> land = load_landscape("win10")
    >>> [(d.name, d.kind) for d in differences(land, {"NCCL_ALGO": "Tree",
    ...                                              "xla_gpu_experimental_parallel_collective_overlap_limit": 2})]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('xla_gpu_enable_pipelined_all_gather', 'companion'),
     ('xla_gpu_all_gather_combine_threshold_bytes', 'companion'),
     ('xla_gpu_experimental_parallel_collective_overlap_limit', 'passenger')]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._metrics import SeedResult, within_1pct  # noqa: E402
from benchmarks._random_landscapes import CHOICES, random_landscape  # noqa: E402
from benchmarks.pooled import load  # noqa: E402
from flagopt.errors import FlagoptError  # noqa: E402
from flagopt.workloads.sim import Landscape, load_landscape  # noqa: E402

#: A best value that gains less than this alone on the deployed job pays only in company.
ALONE_PAYS = 0.001


@dataclass(frozen=True)
class Difference:
    """One param on which a pick and the true best differ."""

    name: str
    pick: Any  # the pick's value (the deployed one where it leaves the param unset)
    best: Any
    kind: str  # level | value | passenger | companion | company
    alone: float  # the best's value alone on the deployed job
    repaired: float  # the pick's true gain with this one value set as the best sets it


def differences(land: Landscape, pick: Mapping[str, Any]) -> list[Difference]:
    """Every param the pick sets otherwise than the true best, in the landscape's param order."""
    deployed = land.resolve({})
    chosen = land.resolve(pick)
    best = land.resolve(land.best().settings)
    out = []
    for name in land.params:
        if chosen[name] == best[name]:
            continue
        alone = land.true_gain({name: best[name]})
        if best[name] == deployed[name]:
            kind = "passenger"
        elif chosen[name] != deployed[name]:
            numeric = isinstance(best[name], (int, float)) and not isinstance(best[name], bool)
            kind = "level" if numeric else "value"
        else:
            kind = "companion" if alone >= ALONE_PAYS else "company"
        out.append(Difference(name, chosen[name], best[name], kind, alone, land.true_gain({**pick, name: best[name]})))
    return out


def classify(diffs: Sequence[Difference], best: float) -> str:
    """The miss's class: its largest repair's kind when that one change brings the pick within 1 %, else
    ``several``."""
    if not diffs:
        return "several"
    top = max(diffs, key=lambda d: d.repaired)
    return top.kind if within_1pct(top.repaired, best) else "several"


def landscape_of(result: SeedResult, folder: Path, landscape_file: Path | None) -> Landscape:
    """The landscape a result ran on: its held-out family drawn again from the seed, or a named one."""
    if result.family:
        if result.family not in CHOICES:
            raise SystemExit(f"{result.landscape}: unknown held-out family {result.family!r}")
        return random_landscape(result.family, result.seed, folder)
    try:
        return load_landscape(result.landscape, landscape_file) if landscape_file else load_landscape(result.landscape)
    except FlagoptError as exc:
        raise SystemExit(f"{exc} (a landscape of your own: pass --landscape-file)") from None


def _short(name: str) -> str:
    return name.removeprefix("xla_gpu_").removeprefix("xla_")


def report(results: Sequence[SeedResult], strategy: str, landscape_file: Path | None) -> str:
    """The markdown report: one row per miss, then the classes by landscape."""
    misses = sorted((r for r in results if r.strategy == strategy and not r.within_1pct),
                    key=lambda r: (r.family or r.landscape, r.seed))
    studied = Counter(r.family or r.landscape for r in results if r.strategy == strategy)
    total = sum(studied.values())
    lines = [f"{len(misses)} of {total} {strategy} studies ended more than 1 % below the true best.", "",
             "| study | verdict | pick / best | class | largest repair | every difference: kind, best value alone "
             "-> pick with it |", "|---|---|---|---|---|---|"]
    classes: dict[str, Counter] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for r in misses:
            pick = r.detail.get("settings")
            group = r.family or r.landscape
            study = r.landscape if r.family else f"{r.landscape}-{r.seed}"
            if pick is None:
                lines.append(f"| {study} | {r.verdict} | {r.true_gain:+.2%} / {r.best_gain:+.2%} | unknown | | "
                             "no `detail.settings`: re-run with this checkout's decisions.py |")
                classes.setdefault(group, Counter())["unknown"] += 1
                continue
            land = landscape_of(r, Path(scratch), landscape_file)
            diffs = differences(land, pick)
            kind = classify(diffs, r.best_gain)
            classes.setdefault(group, Counter())[kind] += 1
            top = max(diffs, key=lambda d: d.repaired) if diffs else None
            repair = f"{_short(top.name)} {top.pick} -> {top.best}: {top.repaired:+.2%}" if top else ""
            every = "; ".join(f"{_short(d.name)} {d.pick} -> {d.best} ({d.kind}): {d.alone:+.2%} -> {d.repaired:+.2%}"
                              for d in diffs)
            lines.append(f"| {study} | {r.verdict} | {r.true_gain:+.2%} / {r.best_gain:+.2%} | {kind} | {repair} "
                         f"| {every} |")
    kinds = ["level", "value", "passenger", "companion", "company", "several", "unknown"]
    lines += ["", "| landscape | studies | misses | " + " | ".join(kinds) + " |", "|---|---|---|" + "---|" * len(kinds)]
    for group in sorted(studied):
        seen = classes.get(group, Counter())
        lines.append(f"| {group} | {studied[group]} | {sum(seen.values())} | "
                     + " | ".join(str(seen[k]) for k in kinds) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="decisions.py --json files")
    parser.add_argument("--strategy", default="flagopt")
    parser.add_argument("--landscape-file", type=Path, help="the --landscape-file the results ran with, if any")
    args = parser.parse_args(argv)
    results = load(args.results)
    if not any(r.strategy == args.strategy for r in results):
        raise SystemExit(f"no {args.strategy} results in {', '.join(map(str, args.results))}")
    sys.stdout.write(report(results, args.strategy, args.landscape_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
