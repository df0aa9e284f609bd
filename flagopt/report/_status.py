"""Progress of a study that runs elsewhere, read from its storage and the running trial's log."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from flagopt.executors import log_path_for
from flagopt.logs import last_step
from flagopt.study import StudyData, slot_line


@dataclass(frozen=True)
class RunningTrial:
    number: int
    label: str
    reason: str
    job_id: str
    step: int | None  # last step printed in rank 0's log; None before the first
    last: int  # the last step of the steady-state window
    elapsed_s: float
    log_path: str
    slot: str = ""


@dataclass(frozen=True)
class StudyStatus:
    study: str
    model_tag: str
    parallelism: str
    counts: dict[str, int]
    running: tuple[RunningTrial, ...]
    best: str  # "label +x.xx % [lo, hi] (verdict, n runs)" or "-"
    verdict: dict | None
    slots: tuple[str, ...] = ()  # one line per slot when the study has several (or lost its one)
    budget: tuple[int, int] = (0, 0)  # runs used, max_trials (as the space now stands)
    verdict_text: str | None = None  # the verdict as readers show it (StudyData.verdict_text)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def study_status(data: StudyData, *, now: float | None = None) -> StudyStatus:
    """Counts by status, the running trials with their step k/N, the best gain so far and the verdict."""
    now = time.time() if now is None else now
    metric = data.space.get("metric") or {}
    fmt = "regex" if (metric.get("format") == "regex" or metric.get("regex") or metric.get("pattern")) else "maxtext"
    pattern = metric.get("regex") or metric.get("pattern")
    running = []
    for r in data.all_records:
        if r.status != "running":
            continue
        log = r.attrs.get("log_path") or (str(log_path_for(r.attrs["trial_dir"], 0)) if r.attrs.get("trial_dir") else "")
        text = _read(log) if log else ""
        step = last_step(text, fmt=fmt, pattern=pattern) if text else None
        since = r.attrs.get("started_at") or r.attrs.get("submitted_at") or now
        running.append(RunningTrial(r.number, r.label, str(r.attrs.get("reason") or ""), str(r.attrs.get("job_id") or ""),
                                    step, data.window[1], max(0.0, now - float(since)), log, r.slot))
    best = data.recommended_arm
    best_text = "-"
    if best is not None:
        est, fresh_runs = data.shown(best)  # the number the leaderboard and the verdict show for it
        fresh = f"{fresh_runs} fresh of " if fresh_runs else ""
        best_text = (f"{best.label} {100 * est.gain:+.2f} % [{100 * est.lo:+.2f}, {100 * est.hi:+.2f}] "
                     f"({best.verdict}, {fresh}{best.n} run{'s' if best.n != 1 else ''})")
    slots = data.slot_summary()
    lines = tuple(slot_line(s) for s in slots) if len(slots) > 1 or any(s.lost for s in slots) else ()
    return StudyStatus(study=data.name, model_tag=data.model_tag, parallelism=data.parallelism,
                       counts=dict(Counter(r.status for r in data.all_records)), running=tuple(running),
                       best=best_text, verdict=data.verdict, slots=lines, budget=data.budget,
                       verdict_text=data.verdict_text)
