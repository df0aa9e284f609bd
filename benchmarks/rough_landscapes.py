"""Peers of the shipped landscapes on a rougher cluster: stragglers (now and then one run is a few percent slow) and
a level shift (the job's throughput moves by a few percent at one launch and stays there), for
``benchmarks/decisions.py --landscape-file``.

Both happen on real clusters and neither is in the shipped landscapes, whose runs scatter normally around a smooth
drift. A peer keeps its landscape's params, effects and true best, so its figures read against the shipped one's.

Example:
    python benchmarks/rough_landscapes.py /tmp/rough.yaml
    python benchmarks/decisions.py --landscape-file /tmp/rough.yaml --strategies flagopt manual --seeds 30 \\
        --null-seeds 30 --first-seed 1000
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from flagopt.workloads.sim import LANDSCAPES  # noqa: E402

#: The shipped landscapes a peer is written for by default: three with a winner, a pair, a below and a null one.
DEFAULT_NAMES = ("win10", "fsdp64", "pp64", "pair", "below5", "null")


def rough_peers(names: Sequence[str], *, straggler: float, cost: float, shift: float, shift_at: int) -> dict:
    """``{name}-strag`` (stragglers) and ``{name}-shift`` (a level shift) for each shipped landscape of ``names``."""
    shipped = yaml.safe_load(LANDSCAPES.read_text())
    unknown = [n for n in names if n not in shipped]
    if unknown:
        raise SystemExit(f"rough_landscapes: no shipped landscape {', '.join(unknown)}; choose from {', '.join(shipped)}")
    out = {}
    for name in names:
        entry = shipped[name]
        strag = copy.deepcopy(entry)
        strag["noise"] = {**strag["noise"], "straggler": straggler, "straggler_cost": cost}
        strag["description"] = (f"{entry['description']} With stragglers: {straggler:.0%} of runs "
                                f"{cost / 2:.0%}-{1.5 * cost:.0%} slow.")
        out[f"{name}-strag"] = strag
        moved = copy.deepcopy(entry)
        moved["drift"] = {**moved["drift"], "shift": shift, "shift_at": shift_at}
        moved["description"] = f"{entry['description']} With a level shift of {shift:+.0%} at launch {shift_at}."
        out[f"{name}-shift"] = moved
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the landscapes file to write")
    parser.add_argument("--landscapes", nargs="+", default=list(DEFAULT_NAMES), metavar="NAME")
    parser.add_argument("--straggler", type=float, default=0.06, help="a run's probability to straggle (0.06)")
    parser.add_argument("--cost", type=float, default=0.04, help="a straggler's mean slowdown (0.04: 2-6 %%)")
    parser.add_argument("--shift", type=float, default=-0.03, help="the level shift (-0.03)")
    parser.add_argument("--shift-at", type=int, default=25, help="the launch it happens at (25)")
    args = parser.parse_args(argv)
    peers = rough_peers(args.landscapes, straggler=args.straggler, cost=args.cost, shift=args.shift,
                        shift_at=args.shift_at)
    args.out.write_text(yaml.safe_dump(peers, sort_keys=False))
    print(f"wrote {len(peers)} landscapes to {args.out}: {', '.join(peers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
