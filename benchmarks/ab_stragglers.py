"""How often does ``flagopt ab`` name a slow run that is only noise, and how often does it find a real one?

Usage:
    python benchmarks/ab_stragglers.py [--trials 20000] [--seed 0] [--out table.md]

Simulates A/B records (Gaussian run noise of the stated sigma, a round-level drift that the pairs cancel) and
judges them with :func:`flagopt.ab.slow_runs`, the rule ``flagopt ab`` applies (docs/report.md). Two columns per
setting: the share of A/Bs without a straggler in which some run is named (false), and the share in which patch
B's run of round 2, made 5 % slow, is named (found). The rule is given the study's run sigma either as the truth,
or 30 % low (a study that measured its noise on a calm day), or as 0 (``x0``: the A/B's own scatter and the 0.3 %
floor alone, the rule ``flagopt ab`` would need without a study, and does not apply).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``flagopt`` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flagopt.ab import slow_runs

SIGMAS = (0.002, 0.005, 0.01, 0.02)
ROUNDS = (4, 5, 8)
PATCHES = (1, 3)
SLOW = 0.05


def _values(rng: np.random.Generator, sigma: float, rounds: int, patches: int, slow: bool) -> list[list[float]]:
    level = 100.0 * (1 + 0.02 * rng.standard_normal(rounds))  # drift between rounds: the pairs cancel it
    out = level[None, :] * (1 + sigma * rng.standard_normal((patches + 1, rounds)))
    if slow:
        out[1, 1] *= 1 - SLOW
    return out.tolist()


def rates(rng: np.random.Generator, sigma: float, told: float, rounds: int, patches: int, trials: int) -> tuple[float, float]:
    """(share of clean A/Bs with a run named, share of A/Bs whose 5 %-slow run is named)."""
    false = found = 0
    for _ in range(trials):
        false += bool(slow_runs(_values(rng, sigma, rounds, patches, False), "maximize", told))
        named = slow_runs(_values(rng, sigma, rounds, patches, True), "maximize", told)
        found += any(s["round"] == 1 and s["arm"] == 1 for s in named)
    return false / trials, found / trials


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20000, help="simulated A/Bs per setting (default 20000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="also write the markdown table here")
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    lines = ["| run sigma | sigma told | rounds | patches | false (clean A/Bs with a run named) | found (5 % slow run) |",
             "|---|---|---|---|---|---|"]
    for sigma in SIGMAS:
        for told in (1.0, 0.7, 0.0):
            for rounds in ROUNDS:
                for patches in PATCHES:
                    false, found = rates(rng, sigma, sigma * told, rounds, patches, args.trials)
                    lines.append(f"| {sigma:.1%} | x{told:g} | {rounds} | {patches} | {false:.2%} | {found:.1%} |")
                    print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
