"""The leaderboard as data: one row per configuration (arm), plus the baseline and every failed trial."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from flagopt.evidence import human_bytes
from flagopt.space import NoiseSpec
from flagopt.decide import Arm, arms_of, stragglers
from flagopt.study._records import BASELINE, RunRecord

COLUMNS = ["profile", "trial", "kind", "flags", "steady", "step_s", "delta_pct", "ci_lo_pct", "ci_hi_pct", "verdict",
           "runs", "status", "failure", "slots"]


def settings_text(settings: dict[str, Any] | None) -> str:
    """``--flag=v ENV=v key=v``: what a configuration changes on top of the baseline."""
    if not settings:
        return ""
    parts = [f"--{k}={_v(v)}" for k, v in (settings.get("xla") or {}).items()]
    parts += [f"libtpu:--{k}={_v(v)}" for k, v in (settings.get("libtpu") or {}).items()]
    parts += [f"{k}={_v(v)}" for k, v in (settings.get("env") or {}).items()]
    parts += [f"{k}={_v(v)}" for k, v in (settings.get("args") or {}).items()]
    return " ".join(parts)


#: the settings groups of a trial record, and the param target that sets each
GROUPS = {"xla": "xla", "libtpu": "libtpu", "env": "env", "args": "arg"}
_PLATFORM_WORDS = ("xla", "gpu", "cpu", "tpu")
_UNITS = {"bytes": None, "mib": "MiB", "kib": "KiB", "gib": "GiB"}
_SHORTEST = 5  # characters: "eigen" yes, "s" or "bytes"-less "ag" no


def param_names(space: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """``(target, flag or variable) -> param name`` from a space as stored on the study (``flagopt.space``).

    Example:
        >>> param_names({"params": {"ag_threshold": {"xla": "xla_gpu_all_gather_combine_threshold_bytes"}}})
        {('xla', 'xla_gpu_all_gather_combine_threshold_bytes'): 'ag_threshold'}
    """
    out = {}
    for name, spec in ((space or {}).get("params") or {}).items():
        for target in GROUPS.values():
            if isinstance(spec, Mapping) and isinstance(spec.get(target), str):
                out[(target, spec[target])] = str(name)
    return out


def short_flag_names(flags: Iterable[str]) -> dict[str, str]:
    """A short name per XLA / libtpu flag: the shortest tail of its words (without the ``xla_gpu_`` prefix or a unit
    word, at least 5 characters) that no other flag of ``flags`` ends with.

    Example:
        >>> short_flag_names(["xla_cpu_multi_thread_eigen", "xla_gpu_enable_latency_hiding_scheduler"])
        {'xla_cpu_multi_thread_eigen': 'eigen', 'xla_gpu_enable_latency_hiding_scheduler': 'scheduler'}
        >>> short_flag_names(["xla_gpu_all_gather_combine_threshold_bytes", "xla_gpu_all_reduce_combine_threshold_bytes"])
        {'xla_gpu_all_gather_combine_threshold_bytes': 'gather_combine_threshold', 'xla_gpu_all_reduce_combine_threshold_bytes': 'reduce_combine_threshold'}
    """
    words = {}
    for flag in dict.fromkeys(flags):
        w = flag.split("_")
        while len(w) > 1 and w[0] in _PLATFORM_WORDS:
            w = w[1:]
        if len(w) > 1 and w[-1] in _UNITS:
            w = w[:-1]
        words[flag] = w
    out = {}
    for flag, w in words.items():
        others = [o for f, o in words.items() if f != flag]
        for k in range(1, len(w) + 1):
            tail = w[-k:]
            if len("_".join(tail)) >= _SHORTEST and not any(o[-k:] == tail for o in others):
                break
        out[flag] = "_".join(tail)
    return out


def compact_settings(settings: dict[str, Any] | None, names: Mapping[tuple[str, str], str] | None = None,
                     short: Mapping[str, str] | None = None) -> str:
    """``ag_threshold=1.4 MiB, eigen=false``: what a configuration changes, by short names, sizes made readable.

    A setting goes by its param's name (``names``, from :func:`param_names`), else an XLA / libtpu flag by its short
    name (``short``, from :func:`short_flag_names`; derived from these settings alone when not given); env vars and
    workload args keep their names. A ``*_bytes`` flag shows its value in KiB/MiB/GiB, ``*_mib`` in MiB.

    Example:
        >>> compact_settings({"xla": {"xla_gpu_all_gather_combine_threshold_bytes": 1468006,
        ...                           "xla_cpu_multi_thread_eigen": False}, "env": {"NCCL_PROTO": "Simple"}},
        ...                  {("xla", "xla_gpu_all_gather_combine_threshold_bytes"): "ag_threshold"})
        'ag_threshold=1.4 MiB, eigen=false, NCCL_PROTO=Simple'
    """
    if not settings:
        return ""
    names = names or {}
    flags = [k for group in ("xla", "libtpu") for k in (settings.get(group) or {})]
    short = short if short is not None else short_flag_names(flags)
    parts = []
    for group, target in GROUPS.items():
        for key, value in (settings.get(group) or {}).items():
            name = names.get((target, key)) or (short.get(key, key) if group in ("xla", "libtpu") else key)
            parts.append(f"{name}={_readable(key, value)}")
    return ", ".join(parts)


def gain_text(gain: float | None, ci: tuple[float, float] | None, runs: int, *, fresh_runs: int = 0) -> str:
    """``+10.00 % [+8.36, +11.64] vs baseline-deployed over 2 fresh runs (3 in all)`` (or ``no measured gain``).

    With ``fresh_runs`` the gain is the one measured by the runs after the selecting one, and the text says so.
    """
    if gain is None:
        return "no measured gain"
    band = f" [{100 * ci[0]:+.2f}, {100 * ci[1]:+.2f}]" if ci else ""
    if fresh_runs:
        return (f"{100 * gain:+.2f} %{band} vs baseline-deployed over {fresh_runs} fresh run"
                f"{'s' if fresh_runs != 1 else ''} ({runs} in all)")
    return f"{100 * gain:+.2f} %{band} vs baseline-deployed over {runs} run{'s' if runs != 1 else ''}"


def metric_text(value: float | None) -> str:
    """A steady-state value in the metric's own unit: ``12,345.6`` tokens/s, ``0.01234`` s/step (never ``0.0``).

    Example:
        >>> metric_text(12345.64), metric_text(0.012345), metric_text(None)
        ('12,345.6', '0.01235', '')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4g}"


def metric_label(field: str, direction: str) -> str:
    """The column title of the steady value: the metric's own name, and which way is better for a minimized one.

    Example:
        >>> metric_label("Tokens/s/device", "maximize"), metric_label("seconds", "minimize")
        ('Tokens/s/device', 'seconds (lower is better)')
    """
    return field if direction == "maximize" else f"{field} (lower is better)"


def drift_disagreements(frame: pd.DataFrame, direction: str = "maximize") -> list[tuple[int, str, float, float]]:
    """Rows whose raw steady value and drift-corrected Δ% point different ways: ``(trial, profile, raw %, Δ%)``.

    The raw value is compared with the mean of every baseline-deployed run (the table's first row); Δ% with the
    baseline level interpolated at the run's own time. When the job drifts, the two can disagree, and the table
    must say why (the Δ% is the one to believe). For a minimized metric both are "higher is better" here.
    """
    base = frame[frame["kind"] == BASELINE]
    if base.empty or frame.empty:
        return []
    reference = float(base["steady"].iloc[0])
    out = []
    for row in frame.itertuples():
        if row.kind == BASELINE or row.steady is None or math.isnan(row.steady) or row.delta_pct is None \
                or math.isnan(row.delta_pct) or reference <= 0 or row.steady <= 0:
            continue
        raw = 100.0 * (reference / row.steady - 1.0 if direction == "minimize" else row.steady / reference - 1.0)
        if raw * row.delta_pct < 0:
            out.append((int(row.trial), str(row.profile), raw, float(row.delta_pct)))
    return out


def drift_note(rows: list[tuple[int, str, float, float]], metric: str) -> str:
    """One sentence explaining :func:`drift_disagreements` (empty when there are none)."""
    if not rows:
        return ""
    shown = "; ".join(f"{label} (trial {n}): raw {raw:+.2f} %, Δ {delta:+.2f} %" for n, label, raw, delta in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    return (f"Drift correction: {shown}{more}. The raw {metric} is compared with the mean of all baseline-deployed "
            "runs; Δ% with the baseline runs measured around each run (the job's speed drifted during the study), "
            "so where the two disagree, Δ% is the one to believe.")


#: Below this many degrees of freedom in the run noise, the leaderboard says why its intervals are wide (the 95 %
#: t-quantile is 2.6 at five and 12.7 at one; 1.96 with the noise known).
NOISE_NOTE_DF = 5.0


def noise_note(arms: Iterable[Arm]) -> str:
    """One sentence when the arms' intervals rest on a run noise measured with few degrees of freedom, else empty.

    The noise comes from the controls and the configurations run more than once: early in a study, with most
    configurations run once, it rests on one or two degrees of freedom and a single run's interval spans about a
    dozen standard errors (the demo: +-12 points on a job with 2 % noise). The sentence says so, and what narrows it.
    """
    est = next((a.estimate for a in arms if a.estimate is not None and a.estimate.n and a.estimate.se > 0
                and math.isfinite(a.estimate.se)), None)
    if est is None or est.df >= NOISE_NOTE_DF:
        return ""
    quantile = (est.hi - est.gain) / est.se
    return ("Intervals: the run-to-run noise behind them is measured only by the baseline-deployed runs and the "
            f"configurations run more than once, so far with {est.df:.1f} degrees of freedom, so an interval spans "
            f"+-{quantile:.1f} standard errors (1.96 once the noise is well measured); they narrow as the study runs "
            "drift controls and repeats.")


def straggler_note(records: Iterable[RunRecord], direction: str = "maximize") -> str:
    """One sentence naming the runs left out of every estimate as stragglers (docs/statistics.md §18), else empty.

    Their configurations' ``runs`` in the table count without them; a user who sees a run of the deployed job read
    3 % low in the raw numbers must be able to tell why no gain moved with it.

    Example:
        >>> straggler_note([])
        ''
    """
    records = list(records)
    slow = stragglers(records, direction)
    if not slow:
        return ""
    shown = [f"trial {r.number} ({r.label})" for r in records if r.number in slow]
    listed = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    return (f"Stragglers left out: {listed} read far below what the study's other runs say their configuration "
            "and the drift give (more than 3.5 robust standard deviations: a slow node or a neighbour's job, not "
            "a setting), so no estimate, drift or noise figure uses them; their records stay. If runs straggle "
            "often, check the nodes.")


def _readable(key: str, value: Any) -> str:
    unit = key.rsplit("_", 1)[-1].lower()
    if isinstance(value, int) and not isinstance(value, bool) and unit in _UNITS:
        return human_bytes(value) if _UNITS[unit] is None else f"{value} {_UNITS[unit]}"
    return _v(value)


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
                     "status": "ok", "failure": "", "slots": _slots(base)})
    for arm in arms_of(records, noise, direction):
        est = arm.estimate
        failure = arm.failures[-1].attrs if arm.failures else {}
        rows.append({
            "profile": arm.label, "trial": arm.first.number, "kind": arm.kind,
            "flags": settings_text(arm.first.attrs.get("settings")) if arm.kind != "baseline-no-env" else "(image defaults)",
            "steady": _mean([r.attrs["steady"] for r in arm.runs]), "step_s": _step_s(arm.runs, window),
            "delta_pct": 100 * est.gain if est else None,
            "ci_lo_pct": 100 * est.lo if est else None, "ci_hi_pct": 100 * est.hi if est else None,
            "verdict": ("no effect (same program)" if arm.same_program else
                        arm.verdict + (" (numerics)" if arm.numerics_flagged else "")) if est else "-",
            "runs": arm.n, "status": "ok" if arm.runs else (arm.failures[-1].status if arm.failures else "running"),
            "failure": "" if arm.runs else f"{failure.get('failure_class', '')}: {failure.get('failure_reason', '')}".strip(": "),
            "slots": _slots(arm.runs),
        })
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if frame.empty:
        return frame
    frame["_ok"] = frame["delta_pct"].notna()
    frame = frame.sort_values(["_ok", "delta_pct"], ascending=[False, False], kind="stable").drop(columns="_ok")
    return frame.reset_index(drop=True)


def _slots(runs: Any) -> list[str]:
    """The slots (node groups) the runs ran on, in order of first use."""
    return list(dict.fromkeys(r.slot for r in runs if r.slot))


def _step_s(runs: Any, window: tuple[int, int]) -> float | None:
    """Mean seconds per step over the steady window, averaged over runs."""
    lo, hi = window
    values = []
    for r in runs:
        secs = [s for step, s in (r.attrs.get("step_seconds") or []) if s is not None and lo <= step <= hi]
        if secs:
            values.append(sum(secs) / len(secs))
    return _mean(values)
