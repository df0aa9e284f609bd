"""How long the pinned node sits idle between two trials of a Slurm study.

Usage:
    source /tmp/slurm-local/env.sh
    python benchmarks/slurm_idle_gap.py [--trials 24] [--node node1] [--step-s 0.1] [--serial] [--json gaps.json]

Runs a real study (``flagopt run``, the fake ``flagopt.workloads.faulty`` workload, ~1.5 s a trial) pinned to one
node of the cluster that ``sinfo`` answers for, then reads every job's Start and End from ``sacct`` and reports the
idle gap on the node, End of one job to Start of the next: median, p90 and max. Slurm keeps these times in whole
seconds, so the same gaps are also given from the trial runner's own clock (the process on the node: last
exit to next start), which also counts job launch and teardown. Target: a median gap of at most 2 s.

``--serial`` runs the same study with one job in flight instead of the driver's two, which shows what queueing the
next job while one runs saves.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``flagopt`` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna  # noqa: E402

from flagopt.cli import main  # noqa: E402
from flagopt.executors._slurm_query import parse_slurm_time  # noqa: E402

TARGET_MEDIAN_S = 2.0
SPACE = """\
name: idle-gap
command: ["{{python}}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s={step_s}"]
executor:
  kind: slurm
  slurm: {{nodelist: {node}}}
params:
  seed: {{arg: seed, choices: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}}
stop: {{max_trials: {trials}, max_null: 1000}}
noise: {{baseline_every: 1000}}
"""


def sacct_times(job_ids: list[str], within_s: float = 30.0) -> list[tuple[str, str, float, float]]:
    """``(job id, node list, start, end)`` per job from ``sacct``, once accounting has every end."""
    deadline = time.time() + within_s
    while True:
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,NodeList,Start,End"],
                             capture_output=True, text=True, check=True).stdout
        rows = []
        for line in out.splitlines():
            job, nodes, start, end = line.split("|")
            rows.append((job, nodes, parse_slurm_time(start), parse_slurm_time(end)))
        if (len(rows) == len(job_ids) and all(r[2] and r[3] for r in rows)) or time.time() > deadline:
            return [r for r in rows if r[2] and r[3]]  # type: ignore[misc]
        time.sleep(0.5)


def gaps(spans: list[tuple[float, float]]) -> list[float]:
    """Idle time between consecutive ``(start, end)`` spans on one node, in start order.

    Example:
        >>> gaps([(0.0, 2.0), (3.0, 5.0), (5.5, 6.0)])
        [1.0, 0.5]
    """
    ordered = sorted(spans)
    return [b[0] - a[1] for a, b in zip(ordered, ordered[1:])]


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"n": len(values), "median": statistics.median(values), "p90": p90, "max": ordered[-1],
            "mean": statistics.fmean(values)}


def run(trials: int, node: str, step_s: float, folder: Path) -> dict[str, Any]:
    space = folder / "space.yaml"
    space.write_text(SPACE.format(trials=trials, node=node, step_s=step_s))
    storage = f"sqlite:///{folder}/flagopt.db"
    started = time.time()
    code = main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"])
    wall = time.time() - started
    study = optuna.load_study(study_name="idle-gap", storage=storage)
    attrs = [t.user_attrs for t in study.trials if t.user_attrs.get("job_id")]
    jobs = sacct_times([a["job_id"] for a in attrs])
    runner = [(float(a["started_at"]), float(a["ended_at"])) for a in attrs
              if a.get("started_at") and a.get("ended_at")]
    slurm_gaps = gaps([(start, end) for _, _, start, end in jobs])
    process_gaps = gaps(runner)
    return {
        "exit_code": code, "trials": len(attrs), "statuses": sorted({str(a.get("status")) for a in attrs}),
        "nodes": sorted({nodes for _, nodes, _, _ in jobs}), "wall_s": wall,
        "mean_trial_s": statistics.fmean(end - start for start, end in runner) if runner else None,
        "slurm_gap_s": summary(slurm_gaps) if slurm_gaps else None,
        "process_gap_s": summary(process_gaps) if process_gaps else None,
        "slurm_gaps": slurm_gaps, "process_gaps": process_gaps,
    }


def report(result: dict[str, Any]) -> str:
    """The result as a few lines of text (the numbers docs/slurm.md quotes)."""
    lines = [f"{result['trials']} trials on {', '.join(result['nodes'])} ({', '.join(result['statuses'])}); "
             f"study wall time {result['wall_s']:.1f} s; mean trial (runner) {result['mean_trial_s']:.2f} s"]
    for key, label in (("slurm_gap_s", "sacct End -> next Start"), ("process_gap_s", "runner exit -> next start")):
        if s := result[key]:
            lines.append(f"{label:>26}: median {s['median']:.2f} s, p90 {s['p90']:.2f} s, max {s['max']:.2f} s "
                         f"(mean {s['mean']:.2f} s, n={s['n']})")
    median = (result["slurm_gap_s"] or {}).get("median")
    met = median is not None and median <= TARGET_MEDIAN_S
    lines.append(f"target: median <= {TARGET_MEDIAN_S:g} s: {'met' if met else 'NOT met'}")
    return "\n".join(lines)


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--node", default="node1", help="the one node the study is pinned to")
    parser.add_argument("--step-s", type=float, default=0.1, help="seconds per step of the fake workload (15 steps)")
    parser.add_argument("--serial", action="store_true", help="one job in flight (the driver uses two on Slurm)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result (every gap) here")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.serial:
        from flagopt.cli import _run

        make = _run.make_executor
        _run.make_executor = lambda space, storage: (make(space, storage)[0], 1)
    with tempfile.TemporaryDirectory(prefix="slurm-idle-gap-") as tmp:
        result = run(args.trials, args.node, args.step_s, Path(tmp))
    result["date"] = datetime.now().isoformat(timespec="seconds")
    result["command"] = " ".join(["python", "benchmarks/slurm_idle_gap.py", *(argv or sys.argv[1:])])
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(cli())
