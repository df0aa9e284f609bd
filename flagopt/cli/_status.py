"""``flagopt status STUDY``: progress of a study running elsewhere, from its storage and the running trial's log."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from flagopt.cli._common import add_storage, console, examples
from flagopt.report import study_status
from flagopt.study import study_data


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="progress of a study: trials by status, the running trial, best so far",
                       **examples("python -m flagopt status demo", "python -m flagopt status demo --json"))
    p.add_argument("study")
    add_storage(p)
    p.add_argument("--json", action="store_true", help="the same as one JSON object (counts, running trials, best, "
                                                       "verdict)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    st = study_status(study_data(args.storage, args.study))
    if args.json:
        print(json.dumps(asdict(st), indent=2, default=str))
        return 0
    out = console()
    out.print(f"study [bold]{st.study}[/bold] ({st.model_tag}, {st.parallelism or '-'})")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(st.counts.items())) or "no trials yet"
    out.print(f"trials: {sum(st.counts.values())} ({counts})", markup=False)
    for r in st.running:
        step = "-" if r.step is None else str(r.step)
        where = f" on {r.slot}" if r.slot and st.slots else ""
        out.print(f"running: trial {r.number} {r.label} ({r.reason}) job {r.job_id or '-'}{where} · "
                  f"step {step}/{r.last} · {r.elapsed_s:.0f} s", markup=False)
    if not st.running:
        out.print("running: none", markup=False)
    for line in st.slots:
        out.print(f"slot {line}", markup=False)
    out.print(f"budget: {st.budget[0]} of max_trials {st.budget[1]} runs used", markup=False)
    out.print(f"best so far: {st.best}", markup=False)
    if st.verdict:
        out.print(f"verdict ({st.verdict.get('reason')}): {st.verdict_text}", markup=False)
    else:
        out.print("verdict: none yet", markup=False)
    return 0
