"""The report's sections built from a study: header, TL;DR, inventory, leaderboard, findings, failures, appendix."""

from __future__ import annotations

import datetime as dt
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

from flagopt.errors import FlagoptError
from flagopt.report._content import FailureGroup, ReportData, Row, SignFlip
from flagopt.report._diff import changed_text
from flagopt.report._negative import negative_of
from flagopt.space import render_value
from flagopt.study import (RunRecord, StudyData, drift_disagreements, drift_note, gain_text, is_nan, metric_label,
                           noise_note, other_cells, settings_text, slot_line, straggler_note)

TOP, BOTTOM = 8, 5


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ts else "?"


def _ci(est: Any) -> tuple[float, float]:
    return (100 * est.lo, 100 * est.hi)


def _trial_counts(recs: tuple[RunRecord, ...]) -> str:
    """``40 trials: 38 ok, 2 cancelled; by kind 8 baseline-deployed, ...`` (ok first, then by count)."""
    if not recs:
        return "none"
    by_status: dict[str, int] = defaultdict(int)
    by_kind: dict[str, int] = defaultdict(int)
    for r in recs:
        by_status[r.status] += 1
        by_kind[r.kind] += 1
    statuses = sorted(by_status.items(), key=lambda kv: (kv[0] != "ok", -kv[1], kv[0]))
    kinds = sorted(by_kind.items(), key=lambda kv: (not kv[0].startswith("baseline"), kv[0]))
    return (f"{len(recs)} trial{'s' if len(recs) != 1 else ''}: " + ", ".join(f"{n} {s}" for s, n in statuses)
            + "; by kind " + ", ".join(f"{n} {k}" for k, n in kinds))


def header_of(data: StudyData) -> tuple[tuple[tuple[str, str], ...], str]:
    recs = data.all_records
    starts = [float(r.attrs["submitted_at"]) for r in recs if r.attrs.get("submitted_at")]
    ends = [float(r.attrs["ended_at"]) for r in recs if r.attrs.get("ended_at")]
    base = data.baselines[0] if data.baselines else None
    info = dict((base.attrs.get("run_info") if base else None) or {})
    hosts = sorted({str(r.attrs["host"]) for r in recs if r.attrs.get("host")})
    ex = data.executor
    device = f"{info.get('num_devices', '?')} x {info['device_kind']}" if info.get("device_kind") else "not in the logs"
    versions = ", ".join(f"{k.removesuffix('_version')} {v}" for k, v in sorted(info.items()) if k.endswith("_version"))
    steps = max((s for r in data.baselines for s, _ in (r.attrs.get("steps") or [])), default=None)
    header = (
        ("Date", f"report {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; study ran "
                 f"{_when(min(starts) if starts else None)} to {_when(max(ends) if ends else None)}"),
        ("Model", f"{data.model_tag} ({data.parallelism or 'parallelism not given'}), study `{data.name}`"),
        ("Hardware", f"executor {ex.get('kind', '?')}, {_where(data)}, hosts "
                     f"{', '.join(hosts) or '-'}; devices {device}"),
        ("Versions", versions or "not stated in the logs (MaxText prints jax/jaxlib; NCCL_DEBUG=INFO prints NCCL)"),
        ("Measurement", f"{data.metric_field} ({data.direction}), steady-state window steps {data.window[0]}-"
                        f"{data.window[1]}" + (f" of {steps + 1} steps per run" if steps is not None else "")),
        ("Trials", _trial_counts(recs)),
    )
    command = shlex.join(base.attrs.get("argv") or []) if base else ""
    return header, command


def _where(data: StudyData) -> str:
    """``nodelist node1`` or, for a study on several slots, each slot with its runs, level and whether it was lost."""
    slots = data.slot_summary()
    if len(slots) <= 1:
        lost = f" (LOST: {slots[0].lost})" if slots and slots[0].lost else ""
        return f"nodelist {data.executor.get('nodelist') or '-'}{lost}"
    return (f"{len(slots)} slots, each its own block of baselines (gains are measured within a slot): "
            + "; ".join(slot_line(s) for s in slots))


def _why(data: StudyData, settings: dict[str, Any]) -> str:
    """One sentence from the HLO evidence run, when the study made one."""
    evidence_runs = [r for r in data.records if r.kind == "evidence" and r.attrs.get("trial_dir")]
    if not evidence_runs:
        return "No HLO evidence was recorded (set `evidence: true` in the space for a why-sentence)."
    try:
        from flagopt import evidence
        ev = evidence.analyze(Path(evidence_runs[-1].attrs["trial_dir"]) / "hlo")
        sentences = evidence.explain(settings, ev)
    except (FlagoptError, OSError, ValueError) as exc:
        return f"The HLO evidence could not be read ({exc})."
    return "Why: " + "; ".join(sentences[:3]) + "." if sentences else ""


def tldr_of(data: StudyData) -> tuple[str, ...]:
    verdict = data.verdict or {}
    winner = data.winner
    out = []
    arm = data.arm_of_trial(int(winner["trial"])) if winner else data.best_arm
    if arm is not None and arm.estimate is not None:
        est, fresh = data.shown(arm)  # the winner's fresh runs (statistics.md §11), else all runs: one number per arm
        state = "confirmed" if winner else ("NOT a confirmed winner: the study confirmed none, best estimate" if verdict
                                            else "NOT the study's winner: it drew none yet, best so far")
        out.append(f"Best recipe: **{arm.label}** `{changed_text(arm.first.attrs.get('settings'), data.space) or '(no change)'}`: "
                   f"Δ {gain_text(est.gain, (est.lo, est.hi), arm.n, fresh_runs=fresh)} "
                   f"({arm.verdict}; {state}).")
        out.append(_why(data, arm.first.attrs.get("settings") or {}))
        top = max((a for a in data.arms if a.estimate is not None and a.kind != "baseline-no-env"),
                  key=lambda a: a.estimate.gain)
        if top is not arm:
            out.append(f"**{top.label}** estimates more (Δ {100 * top.estimate.gain:+.2f} % [{100 * top.estimate.lo:+.2f}, "
                       f"{100 * top.estimate.hi:+.2f}] over {top.n} run{'s' if top.n != 1 else ''}, verdict "
                       f"{top.verdict}) but is not confirmed better; the recipe above is.")
    else:
        out.append("No configuration has a measured gain yet.")
    if verdict:
        out.append(f"Verdict ({verdict.get('reason')}): {data.verdict_text}")
    else:
        out.append("The study has no verdict yet (still running, or stopped before deciding).")
    return tuple(x for x in out if x)


def inventory_of(data: StudyData) -> tuple[tuple[str, str, str], ...]:
    base = (data.space.get("baseline") or {})
    rows: list[tuple[str, str, str]] = []
    flags = base.get("xla_flags") or ""
    for token in (flags.split() if isinstance(flags, str) else flags):
        rows.append(("XLA flag", str(token), "deployed"))
    libtpu = base.get("libtpu_flags") or base.get("libtpu_init_args") or ""
    for token in (libtpu.split() if isinstance(libtpu, str) else libtpu):
        rows.append(("LIBTPU flag", str(token), "deployed"))
    for name, value in (base.get("env") or {}).items():
        rows.append(("env", f"{name}={value}", "deployed"))
    for name, value in (base.get("args") or {}).items():
        rows.append(("workload arg", f"{name}={value}", "deployed"))
    for name, value in (base.get("defaults") or {}).items():
        rows.append(("image default", f"{name}={render_value(value)}", "restored by baseline-no-env"))
    first = data.baselines[0] if data.baselines else None
    if first is not None:
        inherited = (first.attrs.get("xla_flags") or "").split()
        declared = set(flags.split() if isinstance(flags, str) else flags)
        for token in inherited:
            if token not in declared:
                rows.append(("XLA flag", token, "inherited from the launching environment"))
    return tuple(rows)


def env_effect_of(data: StudyData) -> str:
    arm = next((a for a in data.arms if a.kind == "baseline-no-env"), None)
    base = data.space.get("baseline") or {}
    deployed = ("xla_flags", "libtpu_flags", "libtpu_init_args", "env", "env_file")
    if arm is None and data.space and not any(base.get(key) for key in deployed):
        return ("The deployed env is empty (no flags or variables beyond those inherited), so baseline-no-env would "
                "be the same run as baseline-deployed and was not run.")
    if arm is None or arm.estimate is None:
        return "baseline-no-env was not measured, so the effect of the deployed env is unknown."
    est = arm.estimate
    worth = 100 * (1 / (1 + est.gain) - 1)
    noise = " (not distinguishable from run noise)" if est.lo <= 0 <= est.hi else ""
    return (f"With the deployed flags and env restored to image defaults (baseline-no-env) the job runs at "
            f"Δ {100 * est.gain:+.2f} % [{100 * est.lo:+.2f}, {100 * est.hi:+.2f}] vs baseline-deployed over "
            f"{arm.n} run{'s' if arm.n != 1 else ''}: the deployed env is worth about {worth:+.2f} %{noise}.")


def rows_of(data: StudyData) -> tuple[tuple[Row, ...], tuple[Row, ...]]:
    winner_trial = int(data.winner["trial"]) if data.winner else None
    rows = []
    for r in data.frame.itertuples():
        if is_nan(r.delta_pct):
            continue
        ci = None if is_nan(r.ci_lo_pct) else (float(r.ci_lo_pct), float(r.ci_hi_pct))
        record = data.record(int(r.trial))
        flags = str(r.flags)
        if not flags.startswith("(") and record is not None:
            flags = changed_text(record.attrs.get("settings"), data.space) or flags
        rows.append(Row(int(r.trial), str(r.profile), flags, None if is_nan(r.steady) else float(r.steady),
                        None if is_nan(r.step_s) else float(r.step_s), float(r.delta_pct), ci, str(r.verdict),
                        int(r.runs), winner=int(r.trial) == winner_trial))
    if len(rows) <= TOP + BOTTOM:
        return tuple(rows), ()
    return tuple(rows[:TOP]), tuple(rows[-BOTTOM:])


def board_notes_of(data: StudyData) -> tuple[str, ...]:
    out = []
    if not data.frame.empty and data.frame["fresh_runs"].any():
        out.append("The winner's Δ% is what the verdict claims: its runs after the one that selected it (fresh); every "
                   "other row is over all its runs.")
    out.append(drift_note(drift_disagreements(data.frame, data.direction), data.metric_field))
    out.append(noise_note(data.arms))
    out.append(straggler_note(data.records, data.direction))
    if data.direction == "minimize":
        out.append(f"{data.metric_field} is minimized: Δ% is the speed-up, baseline {data.metric_field} / this "
                   f"{data.metric_field} - 1, so + is faster.")
    return tuple(x for x in out if x)


def failures_of(records: tuple[RunRecord, ...]) -> tuple[FailureGroup, ...]:
    groups: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        if r.status not in ("ok", "running"):
            groups[str(r.attrs.get("failure_class") or r.status)].append(r)
    out = []
    for cls, recs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        examples = tuple(f"trial {r.number} ({r.label}): {str(r.attrs.get('failure_reason') or r.status)[:300]}"
                         for r in recs[:3])
        out.append(FailureGroup(cls, len(recs), examples))
    return tuple(out)


def appendix_of(records: tuple[RunRecord, ...], slow: frozenset[int] = frozenset()) -> tuple[dict[str, Any], ...]:
    """Every trial; ``slow``: the stragglers the estimates leave out (their status says so)."""
    return tuple({"trial": r.number, "kind": r.kind, "label": r.label, "job_id": r.attrs.get("job_id") or "",
                  "status": r.status + (f" ({r.attrs['failure_class']})" if r.attrs.get("failure_class")
                                       and r.attrs["failure_class"] != r.status else "")
                  + (" (straggler, left out)" if r.number in slow else ""),
                  # a control's level against the controls before it is drift, not a gain: no Δ% for it
                  "delta_pct": None if r.is_baseline else r.attrs.get("delta_pct"),
                  "log_path": r.attrs.get("log_path") or ""} for r in records)


def sign_flips_of(data: StudyData, others: list[StudyData]) -> tuple[SignFlip, ...]:
    here = {a.config_key: a for a in data.arms if a.estimate is not None and a.kind != "baseline-no-env"}
    out = []
    for other in others:
        for arm in other.arms:
            mine = here.get(arm.config_key)
            if mine is None or arm.estimate is None:
                continue
            a, b = mine.estimate, arm.estimate
            flipped = ""
            if a.gain * b.gain < 0 and min(abs(a.gain), abs(b.gain)) >= data.noise.min_effect:
                flipped = "confirmed flip" if (a.lo > 0 > b.hi) or (a.hi < 0 < b.lo) else "flip"
            out.append(SignFlip(settings_text(mine.first.attrs.get("settings")), 100 * a.gain, _ci(a),
                                f"{other.parallelism} ({other.name})", 100 * b.gain, _ci(b), flipped))
    return tuple(out)


def report_data(data: StudyData, *, storage_hint: str | None = None) -> ReportData:
    """Compute every section of the report from ``data`` (reads other studies of the storage for sign flips)."""
    from flagopt.export import NoWinner, build_export, render_env_sh
    from flagopt.report._ab import ab_lines
    from flagopt.report._bubble import bubble_of
    header, command = header_of(data)
    top, bottom = rows_of(data)
    others = other_cells(data)
    where = f" --storage {shlex.quote(storage_hint)}" if storage_hint else ""
    exported = None
    try:
        export = build_export(data)
        exported = (export.provenance["trial"], export.provenance["label"])
        export_text = render_env_sh(export)
        note = f"Written by `python -m flagopt export {shlex.quote(data.name)}{where} -o patch.env.sh`."
        if export.choice.numerics_warning:
            note = f"**{export.choice.numerics_warning}.** {note}"
    except NoWinner as exc:
        export_text, note = "", f"**Keep the deployed job.** {exc.reason[:1].upper()}{exc.reason[1:]}"
    except FlagoptError as exc:
        export_text, note = "", f"Nothing to deploy: {exc.reason}"
    ab, ab_tldr = ab_lines(data, exported)
    return ReportData(
        study=data.name, model_tag=data.model_tag, parallelism=data.parallelism,
        metric=metric_label(data.metric_field, data.direction),
        header=header, command=command, tldr=tldr_of(data) + ((ab_tldr,) if ab_tldr else ()),
        inventory=inventory_of(data),
        env_effect=env_effect_of(data), top=top, bottom=bottom, negative=negative_of(data),
        failures=failures_of(data.records), appendix=appendix_of(data.all_records, data.stragglers),
        sign_flips=sign_flips_of(data, others), other_cells=tuple(f"{o.parallelism} ({o.name})" for o in others),
        export_text=export_text, export_note=note, board_notes=board_notes_of(data),
        winner_trial=int(data.winner["trial"]) if data.winner else None, bubble=bubble_of(data), ab=ab)


