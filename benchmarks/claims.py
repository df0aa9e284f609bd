"""How honest a benchmark run's claims are, and what pulling the budget picks toward their rivals changed.

A budget verdict's pick is claimed at its fresh runs' gain pulled toward its rivals' (``flagopt.stats.shrunk_for_
selection``); ``decisions.py --json`` keeps the fresh runs' own reading beside the claim (``detail.selection``), so one
run gives both columns. The study's runs and its pick are the same either way: only the claim moves.

For each landscape (or family) of ``--strategy``: the claims, how many were pulled, and before / after the pull the
share of 95 % intervals covering the true gain, the mean claimed − true gain, and the claims of +5 % or more for a
configuration truly below +5 % (the issue's ``a +5 % claim`` rows), with the budget verdicts' and the wins' totals.

Usage::

    python benchmarks/decisions.py --strategies flagopt --first-seed 1000 --json r.json
    python benchmarks/claims.py r.json [more.json ...] [--strategy flagopt]

Example:
    >>> row = {"claimed_gain": 0.045, "ci": [0.035, 0.055], "true_gain": 0.038,
    ...        "detail": {"selection": {"fresh_runs_gain": 0.051, "fresh_runs_ci": [0.041, 0.061]}}}
    >>> own_reading(row), pulled_claim(row)
    ((0.051, [0.041, 0.061]), (0.045, [0.035, 0.055]))
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

WIN_BAR = 0.05  # a claim of +5 % or more on a configuration truly below it is the false +5 % claim

Claim = tuple[float, list[float]]


def own_reading(row: dict[str, Any]) -> Claim:
    """The claim before the pull: the fresh runs' own gain and interval (the claim itself when nothing was pulled)."""
    pulled = (row.get("detail") or {}).get("selection")
    return (pulled["fresh_runs_gain"], pulled["fresh_runs_ci"]) if pulled else pulled_claim(row)


def pulled_claim(row: dict[str, Any]) -> Claim:
    """The claim the verdict makes."""
    return row["claimed_gain"], row["ci"]


def summary(rows: Sequence[dict[str, Any]], claim: Callable[[dict[str, Any]], Claim]) -> str:
    """Coverage, mean claimed − true (pp) and false +5 % claims of ``rows`` read with ``claim``."""
    if not rows:
        return "-"
    read = [(claim(r), r["true_gain"]) for r in rows]
    covered = sum(1 for (_, ci), truth in read if ci[0] <= truth <= ci[1])
    bias = round(sum(gain - truth for (gain, _), truth in read) / len(read) * 100, 2) + 0.0  # never -0.00
    false_wins = sum(1 for (gain, _), truth in read if gain >= WIN_BAR > truth)
    return f"{covered}/{len(read)} cover, {bias:+.2f} pp, {false_wins} false +5 %"


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The markdown table of :func:`summary` before and after the pull, per landscape and in total."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.get("family") or row["landscape"]].append(row)
    groups["all budget verdicts"] = [r for r in rows if r["verdict"] != "win"]
    groups["all wins"] = [r for r in rows if r["verdict"] == "win"]
    lines = ["| landscape | claims | pulled | before the pull | after |", "|---|---|---|---|---|"]
    for name, group in groups.items():
        pulled = sum(1 for r in group if (r.get("detail") or {}).get("selection"))
        lines.append(f"| {name} | {len(group)} | {pulled} | {summary(group, own_reading)} | "
                     f"{summary(group, pulled_claim)} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="decisions.py --json files")
    parser.add_argument("--strategy", default="flagopt", help="whose claims (default: flagopt)")
    args = parser.parse_args(argv)
    rows = [r for path in args.results for r in json.loads(path.read_text())
            if r["strategy"] == args.strategy and r["recommends"] and r.get("ci")]
    if not rows:
        print(f"claims: no claim of {args.strategy!r} in {', '.join(map(str, args.results))}", file=sys.stderr)
        return 1
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
