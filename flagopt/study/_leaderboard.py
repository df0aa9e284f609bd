"""The leaderboard as data: one row per configuration (arm), plus the baseline and every failed trial."""

from __future__ import annotations

from typing import Any

import pandas as pd

from flagopt.space import NoiseSpec
from flagopt.study._arms import arms_of
from flagopt.study._records import BASELINE, RunRecord

COLUMNS = ["profile", "trial", "kind", "flags", "steady", "step_s", "delta_pct", "ci_lo_pct", "ci_hi_pct", "verdict",
           "runs", "status", "failure"]


def settings_text(settings: dict[str, Any] | None) -> str:
    """``--flag=v ENV=v key=v``: what a configuration changes on top of the baseline."""
    if not settings:
        return ""
    parts = [f"--{k}={_v(v)}" for k, v in (settings.get("xla") or {}).items()]
    parts += [f"libtpu:--{k}={_v(v)}" for k, v in (settings.get("libtpu") or {}).items()]
    parts += [f"{k}={_v(v)}" for k, v in (settings.get("env") or {}).items()]
    parts += [f"{k}={_v(v)}" for k, v in (settings.get("args") or {}).items()]
    return " ".join(parts)


def _v(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def leaderboard(records: list[RunRecord], noise: NoiseSpec, direction: str = "maximize",
                window: tuple[int, int] = (9, 14)) -> pd.DataFrame:
    """Rows sorted by drift-corrected gain (best first); failed configurations last."""
    rows: list[dict[str, Any]] = []
    base = [r for r in records if r.kind == BASELINE and r.ok]
    if base:
        rows.append({"profile": BASELINE, "trial": base[0].number, "kind": BASELINE, "flags": "(deployed)",
                     "steady": _mean([r.steady for r in base]), "step_s": _step_s(base, window), "delta_pct": 0.0,
                     "ci_lo_pct": None, "ci_hi_pct": None, "verdict": "reference", "runs": len(base),
                     "status": "ok", "failure": ""})
    for arm in arms_of(records, noise, direction):
        est = arm.estimate
        failure = arm.failures[-1].attrs if arm.failures else {}
        rows.append({
            "profile": arm.label, "trial": arm.first.number, "kind": arm.kind,
            "flags": settings_text(arm.first.attrs.get("settings")) if arm.kind != "baseline-no-env" else "(image defaults)",
            "steady": _mean([r.attrs["steady"] for r in arm.runs]), "step_s": _step_s(arm.runs, window),
            "delta_pct": 100 * est.gain if est else None,
            "ci_lo_pct": 100 * est.lo if est else None, "ci_hi_pct": 100 * est.hi if est else None,
            "verdict": (arm.verdict + (" (numerics)" if arm.numerics_flagged else "")) if est else "-",
            "runs": arm.n, "status": "ok" if arm.runs else (arm.failures[-1].status if arm.failures else "running"),
            "failure": "" if arm.runs else f"{failure.get('failure_class', '')}: {failure.get('failure_reason', '')}".strip(": "),
        })
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if frame.empty:
        return frame
    frame["_ok"] = frame["delta_pct"].notna()
    frame = frame.sort_values(["_ok", "delta_pct"], ascending=[False, False], kind="stable").drop(columns="_ok")
    return frame.reset_index(drop=True)


def _step_s(runs: Any, window: tuple[int, int]) -> float | None:
    """Mean seconds per step over the steady window, averaged over runs."""
    lo, hi = window
    values = []
    for r in runs:
        secs = [s for step, s in (r.attrs.get("step_seconds") or []) if s is not None and lo <= step <= hi]
        if secs:
            values.append(sum(secs) / len(secs))
    return _mean(values)
