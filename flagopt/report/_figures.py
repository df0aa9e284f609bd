"""The report's figures: :func:`figure_data` computes what to plot (tested), :func:`draw` turns it into plotly.

* throughput over the study, every run, with the baseline controls and the fitted drift line;
* Δ% per configuration with its confidence interval;
* per-step traces of the top configurations and the baseline;
* parameter importances over the sampled trials (when there are enough of them).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import optuna
import plotly.graph_objects as go

from flagopt import stats
from flagopt.study import StudyData

#: fewer sampled trials than this and importances are noise; say so instead of plotting them.
MIN_SAMPLED = 4
DRIFT_POINTS = 60


@dataclass(frozen=True)
class Point:
    minutes: float
    value: float
    kind: str
    label: str
    trial: int


@dataclass(frozen=True)
class GainBar:
    label: str
    gain_pct: float
    lo_pct: float
    hi_pct: float
    runs: int
    verdict: str
    winner: bool


@dataclass(frozen=True)
class Trace:
    label: str
    trial: int
    steps: tuple[tuple[int, float], ...]
    baseline: bool


#: The timeline's name for the runs every estimate leaves out (docs/statistics.md §18).
STRAGGLER = "straggler (left out)"


@dataclass(frozen=True)
class FigureData:
    metric: str
    window: tuple[int, int]
    timeline: tuple[Point, ...] = ()
    drift: tuple[tuple[float, float], ...] = ()
    gains: tuple[GainBar, ...] = ()
    traces: tuple[Trace, ...] = ()
    importances: dict[str, float] = field(default_factory=dict)
    importance_note: str = ""


def _timeline(data: StudyData) -> tuple[tuple[Point, ...], tuple[tuple[float, float], ...]]:
    ok = [r for r in data.records if r.ok]
    if not ok:
        return (), ()
    t0 = min(r.t for r in ok)
    slow = data.stragglers
    # a straggler is its own trace, and the drift line is drawn without it, as the estimates read the controls
    points = tuple(Point((r.t - t0) / 60, float(r.steady), STRAGGLER if r.number in slow else r.kind, r.label, r.number)
                   for r in ok)
    base = [stats.Run(t=r.t, value=float(r.steady)) for r in data.baselines if r.number not in slow]
    if not base:
        return points, ()
    t1 = max(r.t for r in ok)
    grid = [t0 + (t1 - t0) * i / (DRIFT_POINTS - 1) for i in range(DRIFT_POINTS)] if t1 > t0 else [t0]
    drift = tuple(((t - t0) / 60, stats.baseline_at(base, t).value) for t in grid)
    return points, drift


def _gains(data: StudyData) -> tuple[GainBar, ...]:
    winner = (data.winner or {}).get("config_key")
    bars = [GainBar(a.label, 100 * a.estimate.gain, 100 * a.estimate.lo, 100 * a.estimate.hi, a.n, a.verdict,
                    a.config_key == winner) for a in data.arms if a.estimate is not None]
    return tuple(sorted(bars, key=lambda b: b.gain_pct, reverse=True))


def _traces(data: StudyData, top: int) -> tuple[Trace, ...]:
    def steps(rec) -> tuple[tuple[int, float], ...]:
        return tuple((int(s), float(v)) for s, v in (rec.attrs.get("steps") or []) if v is not None)
    out = []
    if data.baselines:
        b = data.baselines[0]
        out.append(Trace("baseline-deployed", b.number, steps(b), True))
    # the recommended configuration first: a one-run arm can out-estimate the confirmed winner by noise
    recommended = data.recommended_arm
    scored = sorted((a for a in data.arms if a.estimate is not None and a.runs and a.kind != "baseline-no-env"),
                    key=lambda a: (a is not recommended, -a.estimate.gain))
    out += [Trace(a.label, a.runs[0].number, steps(a.runs[0]), False) for a in scored[:top]]
    return tuple(out)


def importances(data: StudyData) -> tuple[dict[str, float], str]:
    """fANOVA importances over the completed sampled trials, or a note saying why there are none."""
    trials = [t for t in data.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
              if t.params and t.user_attrs.get("status") == "ok"]
    if len(trials) < MIN_SAMPLED:
        return {}, (f"{len(trials)} completed sampled trial{'s' if len(trials) != 1 else ''}: parameter importances "
                    f"need at least {MIN_SAMPLED}")
    names = sorted({name for t in trials for name in t.params})
    trials = [t for t in trials if set(t.params) == set(names)]
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the scratch study would announce itself
    try:
        scratch = optuna.create_study(direction="maximize")
    finally:
        optuna.logging.set_verbosity(level)
    for t in trials:
        scratch.add_trial(optuna.trial.create_trial(params=t.params, distributions=t.distributions, value=t.value))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(scratch)
    except (ValueError, RuntimeError) as exc:  # e.g. every sampled value identical
        return {}, f"parameter importances could not be computed from {len(trials)} trials: {exc}"
    return {k: float(v) for k, v in found.items()}, f"fANOVA over {len(trials)} completed sampled trials"


def figure_data(data: StudyData, *, top: int = 3) -> FigureData:
    """What the report plots, as plain data."""
    timeline, drift = _timeline(data)
    imps, note = importances(data)
    return FigureData(metric=data.metric_field, window=data.window, timeline=timeline, drift=drift,
                      gains=_gains(data), traces=_traces(data, top), importances=imps, importance_note=note)


def draw(fd: FigureData) -> dict[str, go.Figure]:
    """One plotly figure per panel, keyed by a stable id."""
    figs: dict[str, go.Figure] = {}
    tl = go.Figure()
    # one trace per kind, so the sampled cloud, the profiles and their repeats read apart from the controls
    kinds = sorted({p.kind for p in fd.timeline}, key=lambda k: (k != "baseline-deployed", k))
    for kind in kinds:
        pts = [p for p in fd.timeline if p.kind == kind]
        control = kind == "baseline-deployed"
        tl.add_trace(go.Scatter(x=[p.minutes for p in pts], y=[p.value for p in pts], mode="markers",
                                name="baseline-deployed (controls)" if control else kind,
                                marker=dict(size=10, symbol="diamond") if control
                                else dict(size=9, symbol="x") if kind == STRAGGLER else dict(size=7),
                                text=[f"trial {p.trial}: {p.label}" for p in pts]))
    if fd.drift:
        tl.add_trace(go.Scatter(x=[d[0] for d in fd.drift], y=[d[1] for d in fd.drift], mode="lines",
                                name="fitted drift (baseline level)"))
    tl.update_layout(title=f"{fd.metric} over the study", xaxis_title="minutes since the first run",
                     yaxis_title=fd.metric)
    figs["timeline"] = tl

    g = fd.gains
    gains = go.Figure(go.Scatter(
        x=[b.gain_pct for b in g], y=[("⭐ " if b.winner else "") + b.label for b in g], mode="markers",
        error_x=dict(type="data", symmetric=False, array=[b.hi_pct - b.gain_pct for b in g],
                     arrayminus=[b.gain_pct - b.lo_pct for b in g]),
        text=[f"{b.verdict}, {b.runs} runs" for b in g], name="Δ%"))
    gains.add_vline(x=0.0, line_dash="dash")
    gains.update_layout(title="Δ% vs baseline-deployed (drift-corrected, confidence interval)", xaxis_title="Δ%",
                        yaxis=dict(autorange="reversed"), height=max(350, 40 * len(g) + 150))
    figs["gains"] = gains

    steps = go.Figure()
    for tr in fd.traces:
        steps.add_trace(go.Scatter(x=[s for s, _ in tr.steps], y=[v for _, v in tr.steps], mode="lines+markers",
                                   name=f"{tr.label} (trial {tr.trial})", line=dict(dash="dash" if tr.baseline else "solid")))
    # step 0 includes compilation (tens of times slower); scaled to it, the steady-state differences vanish
    shown = [v for tr in fd.traces for s, v in tr.steps if s >= 1]
    if shown:
        pad = 0.05 * (max(shown) - min(shown) or max(shown) or 1.0)
        steps.update_yaxes(range=[min(shown) - pad, max(shown) + pad])
    steps.add_vrect(x0=fd.window[0], x1=fd.window[1], opacity=0.1, line_width=0, annotation_text="steady window")
    steps.update_layout(title="per-step trace: top configurations and the baseline (step 0, compilation, off scale)",
                        xaxis_title="step",
                        yaxis_title=fd.metric)
    figs["steps"] = steps

    imp = go.Figure(go.Bar(x=list(fd.importances.values()), y=list(fd.importances.keys()), orientation="h"))
    imp.update_layout(title=f"parameter importances ({fd.importance_note})", xaxis_title="importance",
                      yaxis=dict(autorange="reversed"))
    if not fd.importances:
        imp.add_annotation(text=fd.importance_note, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    figs["importances"] = imp
    return figs
