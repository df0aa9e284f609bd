"""Issue 25's targets pooled over several seed sets of ``decisions.py --json``, each share with its 95 % interval.

One seed set of 30 is not enough to say whether a target of 85 % is met: a strategy that is right 82 % of the time
scores 73 % on one set and 90 % on the next (win10, the thirty-second-session note in docs/benchmark-decisions.md).
This pools the files given (a landscape and seed counted once per strategy) and gives each share target its Wilson
interval (``scipy.stats.binomtest``), so a figure reads as *met* (the interval on the target's side), *missed*
(on the other) or *open* (it spans the target: more seeds, not a verdict).

Usage::

    python benchmarks/decisions.py --strategies flagopt --seeds 30 --first-seed 12000 --json s12000.json
    python benchmarks/pooled.py s1000.json s12000.json s13000.json [--strategy flagopt] [--out pooled.md]

Example:
    >>> lo, hi = wilson(25, 30)
    >>> round(lo, 2), round(hi, 2)
    (0.66, 0.93)
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._metrics import SeedResult, summarise  # noqa: E402

_FIELDS = {f.name for f in fields(SeedResult)}


def wilson(successes: int, trials: int) -> tuple[float, float]:
    """The Wilson score interval (95 %) of a share ``successes / trials``."""
    ci = binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def load(paths: Iterable[Path]) -> list[SeedResult]:
    """Every seed result in ``paths``; a (strategy, landscape, seed) in two files is a mistake and raises."""
    out: dict[tuple[str, str, int], SeedResult] = {}
    for path in paths:
        try:
            rows = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{path}: not a decisions.py --json file ({exc})") from None
        if not isinstance(rows, list):
            raise SystemExit(f"{path}: not a decisions.py --json file (a list of seed results expected)")
        for row in rows:
            kept = {k: v for k, v in row.items() if k in _FIELDS}
            for key in ("ci", "repeated_failures"):
                if isinstance(kept.get(key), list):
                    kept[key] = tuple(kept[key])
            result = SeedResult(**kept)
            key = (result.strategy, result.landscape, result.seed)
            if key in out:
                raise SystemExit(f"{path}: {result.strategy} on {result.landscape} seed {result.seed} is also in an "
                                 "earlier file: pool distinct seed sets")
            out[key] = result
    return list(out.values())


@dataclass(frozen=True)
class Share:
    """One share target over the pooled seeds."""

    name: str
    target: float
    above: bool  # the target is a floor (>=) rather than a ceiling (<=)
    hits: int
    seeds: int

    @property
    def status(self) -> str:
        """``met`` or ``missed`` when the interval is on one side of the target; ``open`` when it spans it, with the
        side the pooled share is on. A target of none at all (no recommendation on a null job) is a count: met by
        zero in at least 50 seeds, as the issue states it."""
        lo, hi = wilson(self.hits, self.seeds)
        share = self.hits / self.seeds
        if not self.above and self.target == 0.0:
            return "met" if self.hits == 0 and self.seeds >= 50 else "missed" if self.hits else "open"
        if self.above:
            if lo >= self.target or hi < self.target:
                return "met" if lo >= self.target else "missed"
            return "open, on target" if share >= self.target else "open, short of it"
        if hi <= self.target or lo > self.target:
            return "met" if hi <= self.target else "missed"
        return "open, on target" if share <= self.target else "open, short of it"

    def row(self) -> str:
        lo, hi = wilson(self.hits, self.seeds)
        sign = ">=" if self.above else "<="
        return (f"| {self.name} | {sign} {self.target:.0%} | {self.hits}/{self.seeds} = {self.hits / self.seeds:.1%} "
                f"[{lo:.1%}, {hi:.1%}] | {self.status} |")


def _count(n: int, share: float) -> int:
    """The studies of ``n`` behind a summary's ``share`` (a summary keeps shares; the interval needs counts)."""
    return round(share * n)


def shares(results: Sequence[SeedResult], strategy: str) -> list[Share]:
    """The share targets of issue 25 for ``strategy``, per landscape (a held-out family pooled as one), from the
    benchmark's own summaries (:func:`~benchmarks._metrics.summarise`, the grouping and kinds of its tables)."""
    out: list[Share] = []
    for s in summarise(results, by_family=True):
        if s.strategy != strategy:
            continue
        n = s.seeds
        count = functools.partial(_count, n)
        if s.kind == "win":
            out.append(Share(f"{s.landscape}: within 1 % of the true best", 0.85, True, count(s.within_1pct), n))
            out.append(Share(f"{s.landscape}: win verdict", 0.95, True, s.verdicts.get("win", 0), n))
        elif s.kind == "below":
            out.append(Share(f"{s.landscape}: within 1 % of the true best", 0.75, True, count(s.within_1pct), n))
            out.append(Share(f"{s.landscape}: a +5 % claim", 0.02, False, count(s.claims_win), n))
        else:
            out.append(Share(f"{s.landscape}: null verdict", 0.95, True, s.verdicts.get("null", 0), n))
            out.append(Share(f"{s.landscape}: a confirmed recommendation", 0.0, False, count(s.recommends), n))
    covered = [r.covered for r in results if r.strategy == strategy and r.covered is not None]
    if covered:
        out.append(Share("every claim: 95 % interval covers the true gain", 0.90, True, sum(covered), len(covered)))
    return out


def report(results: Sequence[SeedResult], strategy: str, sources: Sequence[str]) -> str:
    """The pooled table in markdown, with the runs and claims figures that are not shares."""
    mine = [r for r in results if r.strategy == strategy]
    if not mine:
        raise SystemExit(f"no results of strategy {strategy!r} in {', '.join(sources)}")
    seeds = sorted({r.seed for r in mine})
    lines = [f"Pooled over {len(sources)} file(s): {', '.join(sources)}; strategy {strategy}; "
             f"{len(mine)} studies, seeds {seeds[0]}-{seeds[-1]} ({len(seeds)} distinct).", "",
             "| target | wanted | pooled [95 % interval] | status |", "|---|---|---|---|"]
    lines += [s.row() for s in shares(results, strategy)]
    errors = [r.claimed_gain - r.true_gain for r in mine if r.claims]
    controls = [r.controls_share for r in mine if r.controls_share is not None]
    lines.append("")
    if errors:
        lines.append(f"Mean claimed - true gain: {100 * float(np.mean(errors)):+.2f} pp over {len(errors)} claims "
                     "(wanted <= 0.5 pp).")
    if controls:
        lines.append(f"Controls, median share of a study's runs: {float(np.median(controls)):.1%} (wanted <= 15 %).")
    lines.append("Median runs: " + ", ".join(f"{s.landscape} {s.runs_median:g}" for s in summarise(mine, by_family=True))
                 + ".")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="decisions.py --json files, one per seed set")
    parser.add_argument("--strategy", default="flagopt")
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    text = report(load(args.files), args.strategy, [str(p) for p in args.files])
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
