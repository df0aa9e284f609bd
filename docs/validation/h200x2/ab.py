"""An A/B of an exported env.sh patch against the deployed baseline, independent of the study that chose it.

Runs the space's command ``--pairs`` times as deployed (A) and ``--pairs`` times with the patch sourced on top (B),
interleaved A B, B A, A B, ... so the drift cancels within each pair, and reads every run's steady-state metric with
flagopt's own parser (the space's ``metric``). The gain is the mean of the per-pair ratios B/A - 1 with a 95 %
t-interval over the pairs: runs the study never saw, so nothing in it is selected.

Usage (on the machine the study ran on):
    python docs/validation/h200x2/ab.py --space docs/validation/h200x2/fsdp.yaml --patch patch.env.sh --pairs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scipy import stats

from flagopt.executors import child_environment
from flagopt.logs import parse_steps, steady_state
from flagopt.render import baseline_configs, render
from flagopt.space import load_space

# The patch is a file, sourced by bash as a user would; the command and its args stay argv, never shell text.
_SOURCE_THEN_EXEC = '. "$0" >&2 && exec "$@"'


def run_once(argv: list[str], env: dict[str, str], patch: Path | None, space, timeout_s: float) -> float:
    cmd = ["bash", "-c", _SOURCE_THEN_EXEC, str(patch), *argv] if patch else argv
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    text = done.stdout + "\n" + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"ab: the {'patched' if patch else 'deployed'} run exited {done.returncode}:\n{text[-2000:]}")
    metric = space.metric
    samples = parse_steps(text, fmt=metric.format, field=metric.field, pattern=metric.pattern,
                          tokens_per_step=metric.tokens_per_step)
    return steady_state(samples, metric.window).mean


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", required=True, type=Path)
    ap.add_argument("--patch", required=True, type=Path, help="the env.sh written by `flagopt export`")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--out", type=Path, help="write the runs and the estimate as JSON here")
    args = ap.parse_args(argv)
    if not args.patch.is_file():
        raise SystemExit(f"ab: {args.patch}: no such patch file")
    space = load_space(args.space)
    rendered = render(space, baseline_configs(space)[0])
    env = child_environment(rendered.env)  # the deployed job's environment, as a trial gets it
    timeout_s = space.timeout_min * 60.0
    runs: list[dict[str, object]] = []
    ratios = []
    for pair in range(args.pairs):
        order = ("A", "B") if pair % 2 == 0 else ("B", "A")
        values = {}
        for arm in order:
            started = time.time()
            values[arm] = run_once(list(rendered.argv), env, args.patch.resolve() if arm == "B" else None, space,
                                   timeout_s)
            runs.append({"pair": pair, "arm": arm, "value": values[arm], "wall_s": round(time.time() - started, 1)})
            print(f"pair {pair + 1}/{args.pairs} {arm}: {values[arm]:.1f} {space.metric.field}", flush=True)
        ratios.append(values["B"] / values["A"] - 1.0)
    mean = statistics.fmean(ratios)
    sem = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else float("nan")
    half = stats.t.ppf(0.975, len(ratios) - 1) * sem if len(ratios) > 1 else float("nan")
    summary = {"space": str(args.space), "patch": str(args.patch), "pairs": len(ratios), "gain": mean,
               "ci95": [mean - half, mean + half], "pair_gains": ratios, "runs": runs}
    print(f"patch vs deployed over {len(ratios)} interleaved pairs: {mean:+.2%} "
          f"[{mean - half:+.2%}, {mean + half:+.2%}] (95 % t-interval of the pair gains)")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
