"""Figure data (asserted as data) and the self-contained HTML page."""

from __future__ import annotations

import math

from flagopt.report import draw, figure_data, report_data, render_html


def test_timeline_has_every_measured_run_and_the_drift_passes_through_the_controls(pp):
    fd = figure_data(pp)
    assert sorted(p.trial for p in fd.timeline) == sorted(r.number for r in pp.records if r.ok)
    controls = [p for p in fd.timeline if p.kind == "baseline-deployed"]
    assert len(controls) == len(pp.baselines) >= 2
    # the fitted level is the interpolation between controls: at each end it equals that control
    first, last = min(controls, key=lambda p: p.minutes), max(controls, key=lambda p: p.minutes)
    assert fd.drift[0][0] == first.minutes == 0.0  # the study opens with a baseline run
    assert math.isclose(fd.drift[0][1], first.value, rel_tol=1e-9)
    assert math.isclose(fd.drift[-1][1], last.value, rel_tol=1e-9)
    lo, hi = min(p.value for p in controls), max(p.value for p in controls)
    assert all(lo - 1e-9 <= level <= hi + 1e-9 for _, level in fd.drift)


def test_gains_are_the_arm_estimates_best_first(pp):
    fd = figure_data(pp)
    scored = [a for a in pp.arms if a.estimate is not None]
    assert len(fd.gains) == len(scored)
    assert [b.gain_pct for b in fd.gains] == sorted((b.gain_pct for b in fd.gains), reverse=True)
    assert all(b.lo_pct <= b.gain_pct <= b.hi_pct for b in fd.gains)
    assert [b.label for b in fd.gains if b.winner] == [pp.winner["label"]]


def test_traces_show_the_baseline_and_the_top_configurations(fsdp):
    fd = figure_data(fsdp, top=2)
    assert fd.traces[0].baseline and fd.traces[0].trial == fsdp.baselines[0].number
    assert fd.traces[1].label == fsdp.best_arm.label
    assert len(fd.traces) == 3 and all(len(t.steps) == len(fsdp.record(t.trial).attrs["steps"]) for t in fd.traces)


def test_importances_over_sampled_trials(pp, fsdp):
    fd = figure_data(pp)
    assert set(fd.importances) == {"overlap", "proto"}
    assert math.isclose(sum(fd.importances.values()), 1.0, rel_tol=1e-6)
    # the pp64 truth: the overlap limit moves throughput ~5 %, NCCL_PROTO among LL/LL128/Simple less
    assert fd.importances["overlap"] > fd.importances["proto"]
    empty = figure_data(fsdp)
    assert empty.importances == {} and "need at least" in empty.importance_note


def test_html_is_self_contained_with_every_figure(pp):
    figures = draw(figure_data(pp))
    page = render_html(report_data(pp), figures, markdown_name="x.md")
    assert page.count('class="plotly-graph-div"') == len(figures) == 4
    assert "<script src=" not in page  # nothing fetched: plotly.js is inline
    assert page.count("Plotly.newPlot") == len(figures)
    assert len(page) > 1_000_000  # the inline plotly.js bundle


def test_step_traces_are_scaled_to_the_steps_after_compilation(fsdp):
    fd = figure_data(fsdp)
    fig = draw(fd)["steps"]
    lo, hi = fig.layout.yaxis.range
    later = [v for tr in fd.traces for s, v in tr.steps if s >= 1]
    assert lo <= min(later) and hi >= max(later)
    # the compile step is far below the steady state and must not set the scale
    assert all(v < lo for tr in fd.traces for s, v in tr.steps if s == 0 and v < min(later))
    assert hi - lo < 2 * (max(later) - min(later)) + 1e-9


def test_timeline_has_one_trace_per_kind_with_controls_first(pp):
    fd = figure_data(pp)
    fig = draw(fd)["timeline"]
    markers = [t for t in fig.data if t.mode == "markers"]
    assert markers[0].name == "baseline-deployed (controls)"
    assert {t.name for t in markers[1:]} == {p.kind for p in fd.timeline} - {"baseline-deployed"}
    assert sum(len(t.x) for t in markers) == len(fd.timeline)


def test_empty_importances_say_why_on_the_figure(fsdp):
    fd = figure_data(fsdp)
    fig = draw(fd)["importances"]
    assert [a.text for a in fig.layout.annotations] == [fd.importance_note]
