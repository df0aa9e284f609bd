"""``flagopt leaderboard STUDY``: configurations by drift-corrected gain, with verdicts and failures."""

from __future__ import annotations

import argparse
import json
import math

from rich.table import Table

from flagopt.cli._common import add_storage, console, examples
from flagopt.study import (compact_settings, drift_disagreements, drift_note, is_nan, metric_label, metric_text,
                           noise_note, param_names, short_flag_names, slot_line, straggler_note,
                           study_data)


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leaderboard", help="print a study's configurations ranked by gain vs baseline-deployed",
                       **examples("python -m flagopt leaderboard demo", "python -m flagopt leaderboard demo --json"))
    p.add_argument("study")
    add_storage(p)
    p.add_argument("--json", action="store_true",
                   help='machine-readable: {"study", "verdict" (null until the study drew one), "rows"}')
    p.add_argument("--wide", action="store_true",
                   help="the full flags each configuration sets (default: short names, e.g. ag_threshold=1.4 MiB)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    data = study_data(args.storage, args.study)
    frame = data.frame
    out = console()
    if args.json:
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                for row in frame.to_dict(orient="records")]
        print(json.dumps({"study": data.name, "verdict": data.verdict, "rows": rows}, indent=2, default=str))
        return 0
    # The metric's own name goes in the title: a long one as a column header would squeeze the flags column.
    table = Table(title=f"{args.study} — Δ% vs baseline-deployed (drift-corrected); steady = "
                        f"{metric_label(data.metric_field, data.direction)}")
    for col, justify in (("#", "right"), ("profile", "left"), ("flags", "left"), ("steady", "right"),
                         ("step (s)", "right"), ("Δ%", "right"), ("95% CI", "right"), ("verdict", "left"),
                         ("runs", "right"), ("status", "left")):
        table.add_column(col, justify=justify, overflow="fold")
    several = len(data.slot_summary()) > 1
    settings_of = {a.first.number: a.first.attrs.get("settings") for a in data.arms if a.kind != "baseline-no-env"}
    names = param_names(data.space)
    short = short_flag_names(k for s in settings_of.values() for g in ("xla", "libtpu") for k in (s or {}).get(g) or {})
    for row in frame.itertuples():
        flags = str(row.flags)
        if not args.wide and row.trial in settings_of:
            flags = compact_settings(settings_of[row.trial], names, short)
        ci = "" if is_nan(row.ci_lo_pct) else f"[{row.ci_lo_pct:+.2f}, {row.ci_hi_pct:+.2f}]"
        table.add_row(str(row.trial), str(row.profile), flags,
                      metric_text(row.steady), "" if is_nan(row.step_s) else f"{row.step_s:.3f}",
                      "" if is_nan(row.delta_pct) else f"{row.delta_pct:+.2f}", ci, str(row.verdict),
                      str(row.runs) + (f" ({row.fresh_runs} fresh)" if row.fresh_runs else "")
                      + (f" on {len(row.slots)} slots" if several and len(row.slots) > 1 else ""),
                      str(row.status) + (f" ({row.failure})" if row.failure else ""))
    out.print(table)
    if frame["fresh_runs"].any():
        out.print("The winner's Δ% is what the verdict claims: its runs after the one that selected it (fresh); "
                  "every other row is over all its runs.", markup=False)
    for note in (drift_note(drift_disagreements(frame, data.direction), data.metric_field), noise_note(data.arms),
                 straggler_note(data.records, data.direction)):
        if note:
            out.print(note, markup=False)
    if data.direction == "minimize":
        out.print(f"Δ% is the speed-up: baseline {data.metric_field} / this {data.metric_field} - 1, so + is faster "
                  "(lower is better for this metric).", markup=False)
    used, budget = data.budget
    out.print(f"budget: {used} of max_trials {budget} runs used", markup=False)
    if several:
        out.print("slots: " + "; ".join(slot_line(s) for s in data.slot_summary()))
    verdict = data.verdict
    if verdict:
        out.print(f"verdict ({verdict['reason']}): {data.verdict_text}", markup=False)
    return 0
