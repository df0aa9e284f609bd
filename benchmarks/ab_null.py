"""Does ``flagopt ab``'s 95 % interval cover 0 when the patch changes nothing?

Usage:
    python benchmarks/ab_null.py [--repeats 20] [--pairs 5] [--space search_spaces/demo.yaml] [--json out.json]

Runs ``--repeats`` independent A/Bs (``flagopt ab --space SPACE --patch null.env.sh --pairs N --new``) of a patch
that sets nothing, on this machine (the CPU demo by default: the reference JAX workload, ~7 s a run, so the full
run of 20 x 5 pairs is ~200 runs, ~25 minutes on an idle machine). A and B are then the same job, and every
interval that excludes 0 is a false "better" or "worse". Target: at least 19 of 20 intervals contain 0.
Each repeat's record stays under a temporary folder (printed), as ``flagopt ab`` writes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``flagopt`` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flagopt.cli import main

ROOT = Path(__file__).resolve().parent.parent
TARGET = 19 / 20


def one_ab(folder: Path, space: Path, patch: Path, pairs: int) -> dict:
    """One A/B of the null patch; its record's summary of the patch arm, plus the per-round values."""
    storage = f"sqlite:///{folder}/flagopt.db"
    before = set(folder.rglob("ab/*.json"))
    code = main(["ab", "--space", str(space), "--patch", str(patch), "--pairs", str(pairs), "--new",
                 "--storage", storage, "--quiet"])
    new = sorted(set(folder.rglob("ab/*.json")) - before)
    if code != 0 or len(new) != 1:
        raise SystemExit(f"ab_null: flagopt ab exited {code} (records: {new})")
    doc = json.loads(new[0].read_text())
    arm = doc["summary"]["arms"][1]
    return {"record": str(new[0]), "gain": arm["vs_deployed"]["gain"], "ci": arm["vs_deployed"]["ci"],
            "verdict": arm["verdict"], "pair_gains": arm["vs_deployed"]["pair_gains"],
            "values": [a["values"] for a in doc["summary"]["arms"]]}


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--space", type=Path, default=ROOT / "search_spaces" / "demo.yaml")
    ap.add_argument("--json", type=Path, default=None, help="write every repeat's figures here")
    args = ap.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="ab-null-"))
    patch = folder / "null.env.sh"
    patch.write_text(": # a null patch: sets nothing, so B is the deployed job again\n")
    print(f"{args.repeats} A/Bs of a null patch, {args.pairs} pairs each, space {args.space}; records under {folder}")
    results = []
    started = time.time()
    for i in range(args.repeats):
        r = one_ab(folder, args.space, patch, args.pairs)
        lo, hi = r["ci"]
        r["contains_0"] = lo <= 0 <= hi
        results.append(r)
        print(f"{i + 1:2d}/{args.repeats}: {100 * r['gain']:+.2f} % [{100 * lo:+.2f}, {100 * hi:+.2f}] "
              f"{'contains 0' if r['contains_0'] else 'EXCLUDES 0'} ({r['verdict']})", flush=True)
    covered = sum(r["contains_0"] for r in results)
    widths = sorted(100 * (r["ci"][1] - r["ci"][0]) for r in results)
    ok = covered >= TARGET * args.repeats
    print(f"{covered}/{args.repeats} intervals contain 0 (target >= {TARGET * args.repeats:.0f}/{args.repeats}): "
          f"{'PASS' if ok else 'FAIL'}; median interval width {widths[len(widths) // 2]:.2f} points; "
          f"{(time.time() - started) / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps({"repeats": args.repeats, "pairs": args.pairs, "space": str(args.space),
                                         "covered": covered, "pass": ok, "results": results}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main_())
