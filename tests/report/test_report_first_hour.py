"""What a cluster engineer reads (issue 23): verdicts that claim no more than the data, one number per arm, the
metric's own name, drift correction explained, the budget as it now stands."""

from __future__ import annotations

import re

import optuna
import pytest

from flagopt.cli import main
from flagopt.report import STRAGGLER, draw, figure_data, report_data, study_data, study_status
from flagopt.study import NOISE_NOTE_DF

NULL_MESSAGE = ("3 distinct profiles evaluated, none better than +2% (best: tree -7.1% [-43.0%, +29.0%], unknown): "
                "throughput is structurally bounded at the editable scope")


def _study(storage: str, name: str, runs, *, space=None, verdict=None, metric=None) -> None:
    """A study from ``(kind, profile, config_key, settings, steady, t)`` runs, as the driver records them."""
    study = optuna.create_study(study_name=name, storage=storage)
    study.set_user_attr("flagopt.space", space or {})
    if metric:
        study.set_user_attr("metric", metric)
    for number, (kind, profile, key, settings, steady, t) in enumerate(runs):
        study.add_trial(optuna.trial.create_trial(value=0.0, user_attrs={
            "kind": kind, "profile": profile, "config_key": key, "status": "ok", "steady": steady,
            "started_at": float(t), "settings": settings, "env": {}, "delta_pct": 41.0 if number == 2 else 0.0}))
    if verdict:
        study.set_user_attr("flagopt.verdict", verdict)


def _noisy(storage: str) -> None:
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    tree = ("profile", "tree", "k1", {"env": {"NCCL_ALGO": "Tree"}})
    _study(storage, "noisy", [(*base, 100.0, 0), (*tree, 70.0, 1), (*base, 160.0, 2), (*tree, 95.0, 3),
                              (*base, 60.0, 4), (*base, 150.0, 6)],
           space={"stop": {"null_gain": 0.02, "max_trials": 6}, "noise": {"max_repeats": 3}},
           verdict={"reason": "null", "message": NULL_MESSAGE, "noise": {"baseline_runs": 4.0, "run_sigma": 0.4}})


def test_a_verdict_on_noise_too_large_says_inconclusive_and_what_it_would_take(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    _noisy(storage)
    data = study_data(storage, "noisy")
    expected = "inconclusive: run-to-run noise 40.0 %, about 6280 runs per configuration would be needed"
    assert data.verdict_text.startswith(expected)
    rep = report_data(data)
    verdict_line = next(line for line in rep.tldr if line.startswith("Verdict"))
    assert expected in verdict_line and "structurally bounded" not in verdict_line
    for verb in ("status", "leaderboard"):
        assert main([verb, "noisy", "--storage", storage]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert expected in out and "structurally bounded" not in out
    # An arm that estimates lower inside that noise is not a finding ("probably hurts" listed every arm).
    assert not any("tree" in line for line in rep.negative), rep.negative


def test_a_verdict_the_noise_supports_is_shown_as_recorded(tmp_path):
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    _study(storage, "quiet", [(*base, 100.0, 0), ("profile", "tree", "k1", {}, 100.3, 1), (*base, 100.2, 2)],
           space={"stop": {"null_gain": 0.02}},
           verdict={"reason": "null", "message": NULL_MESSAGE, "noise": {"baseline_runs": 2.0, "run_sigma": 0.003}})
    assert study_data(storage, "quiet").verdict_text == NULL_MESSAGE


def test_negative_findings_list_only_what_the_data_show(tmp_path):
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    limit = "xla_gpu_experimental_parallel_collective_overlap_limit"
    one = ("profile", "overlap1", "k1", {"xla": {limit: 1}})  # XLA's default (flags.csv): it changes nothing
    two = ("profile", "overlap2", "k2", {"xla": {limit: 2}})
    eigen = ("profile", "eigen_on", "k3", {"xla": {"xla_cpu_multi_thread_eigen": True}})  # declared image default
    _study(storage, "findings", [(*base, 100.0, 0), (*one, 90.0, 1), (*two, 90.1, 2), (*eigen, 89.8, 3),
                                 (*base, 100.2, 4), (*one, 90.2, 5), (*two, 89.9, 6), (*eigen, 90.1, 7),
                                 (*base, 99.9, 8)],
           space={"baseline": {"defaults": {"xla_cpu_multi_thread_eigen": True}}})
    negative = report_data(study_data(storage, "findings")).negative
    assert any(line.startswith("**overlap2**") and "hurts" in line for line in negative), negative
    assert not any("overlap1" in line or "eigen_on" in line for line in negative), negative


def test_one_number_per_arm_in_status_leaderboard_verdict_and_export(tmp_path, capsys, built, fsdp):
    # The demo arm read -9.55 % [-175, +156] in `status` and -7.06 % [-43, +29] in `leaderboard` and the verdict.
    arm = fsdp.winner_arm
    assert arm is not None and arm.claim is not None
    claim = arm.reported  # the runs after its choice where it has them (statistics.md §11), else the fresh runs
    shown = f"{100 * claim.gain:+.2f} % [{100 * claim.lo:+.2f}, {100 * claim.hi:+.2f}]"
    assert f"{claim.gain:+.1%}" in fsdp.verdict["message"]
    assert study_status(fsdp).best.startswith(f"{arm.label} {shown}")
    row = fsdp.frame[fsdp.frame["trial"] == arm.first.number].iloc[0]
    assert (row.delta_pct, row.ci_lo_pct, row.ci_hi_pct) == pytest.approx(
        (100 * claim.gain, 100 * claim.lo, 100 * claim.hi))
    assert row.fresh_runs == arm.fresh_runs
    assert main(["leaderboard", "sim-llm-fsdp", "--storage", built.storage]) == 0
    board = capsys.readouterr().out
    assert f"{100 * claim.gain:+.2f}" in board and "fresh" in board


def test_an_arm_that_is_not_the_winner_shows_all_its_runs_everywhere(tmp_path, capsys):
    # The demo's `status` showed a single fresh run's -9.55 % [-175, +156] where the leaderboard had -7.06 % [-43, +29].
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    _noisy(storage)
    data = study_data(storage, "noisy")
    (tree,) = [a for a in data.arms if a.label == "tree"]
    assert tree.claim is not None and tree.n == 2
    row = data.frame.set_index("profile").loc["tree"]
    shown = f"{row.delta_pct:+.2f} % [{row.ci_lo_pct:+.2f}, {row.ci_hi_pct:+.2f}]"
    assert row.delta_pct == pytest.approx(100 * tree.estimate.gain)
    assert study_status(data).best == f"tree {shown} (unknown, 2 runs)"
    assert main(["status", "noisy", "--storage", storage]) == 0
    assert f"best so far: tree {shown}" in capsys.readouterr().out


def test_the_leaderboard_explains_drift_where_raw_and_delta_disagree(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    # The job sped up from 100 to 200 during the study: 170 is above the baselines' mean (150) but below the level
    # the baselines around it measured (about 190).
    # (times from 1: a record's start time of 0 reads as unknown, and the run is then placed at the present)
    _study(storage, "drifty", [(*base, 100.0, 1), (*base, 101.0, 2), ("profile", "late", "k1", {}, 170.0, 10),
                               (*base, 199.0, 10.5), (*base, 200.0, 11)])
    assert main(["leaderboard", "drifty", "--storage", storage]) == 0
    out = " ".join(capsys.readouterr().out.split())
    hit = re.search(r"Drift correction: late \(trial 2\): raw \+[\d.]+ %, Δ -[\d.]+ %", out)
    assert hit, out
    assert "Δ% is the one to believe" in out


def test_a_minimized_metric_shows_its_own_name_and_unit_and_the_sign(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    _study(storage, "seconds", [(*base, 0.0124, 0), ("profile", "fast", "k1", {}, 0.0110, 1), (*base, 0.0125, 2)],
           metric={"field": "step_seconds", "direction": "minimize", "window": [9, 14]})
    assert main(["leaderboard", "seconds", "--storage", storage]) == 0
    out = capsys.readouterr().out
    assert "step_seconds (lower is better)" in " ".join(out.split()) and "tokens/s" not in out
    assert "0.011" in out and " 0.0 " not in out  # was `steady 0.0` in a tokens/s column
    assert "+ is faster" in " ".join(out.split())
    fast = study_data(storage, "seconds").frame.set_index("profile").loc["fast"]
    assert fast.delta_pct > 0  # faster (fewer seconds) is a positive Δ


def test_after_raising_max_trials_status_shows_the_new_budget(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    _study(storage, "raised", [(*base, 100.0, 0), ("profile", "a", "k1", {}, 101.0, 1)],
           space={"stop": {"max_trials": 12}})
    assert main(["status", "raised", "--storage", storage]) == 0
    assert "budget: 2 of max_trials 12 runs used" in capsys.readouterr().out


def test_the_leaderboard_says_why_its_intervals_are_wide_while_the_noise_rests_on_few_degrees_of_freedom(tmp_path,
                                                                                                        capsys):
    # The demo's first leaderboard: three controls, every configuration run once, a +-12 point interval on a job
    # with 2 % noise, and nothing saying why.
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    base = ("baseline-deployed", "baseline-deployed", "k0", {})
    early = [(*base, 100.0, 1), ("profile", "a", "k1", {}, 103.0, 2), ("profile", "b", "k2", {}, 98.0, 3),
             (*base, 101.5, 4), ("profile", "c", "k3", {}, 101.0, 5), (*base, 99.0, 6)]
    _study(storage, "early", early)
    data = study_data(storage, "early")
    est = next(a.estimate for a in data.arms if a.label == "a")
    assert est.df < NOISE_NOTE_DF
    assert main(["leaderboard", "early", "--storage", storage]) == 0
    out = " ".join(capsys.readouterr().out.split())
    hit = re.search(r"so far with ([\d.]+) degrees of freedom, so an interval spans \+-([\d.]+) standard errors", out)
    assert hit, out
    assert float(hit.group(1)) == pytest.approx(est.df, abs=0.05)
    assert float(hit.group(2)) == pytest.approx((est.hi - est.gain) / est.se, abs=0.05) and float(hit.group(2)) > 2.6
    assert any("degrees of freedom" in note for note in report_data(data).board_notes)
    # Controls and repeats enough: the note goes.
    later = early + [(*base, 100.5 + 0.3 * (i % 3), 7 + 2 * i) for i in range(8)] + \
        [("profile", "a", "k1", {}, 103.2 - 0.2 * (i % 2), 8 + 2 * i) for i in range(8)]
    _study(storage, "later", later)
    data = study_data(storage, "later")
    assert next(a.estimate for a in data.arms if a.label == "a").df >= NOISE_NOTE_DF
    assert main(["leaderboard", "later", "--storage", storage]) == 0
    assert "degrees of freedom" not in capsys.readouterr().out


def test_the_leaderboard_report_and_appendix_name_the_runs_left_out_as_stragglers(tmp_path, capsys):
    # Controls every 7 runs, four configurations at +2 % between them, 1 % noise; control 21 ran 6 % slow (a slow
    # node). The gains leave it out, so a user who sees it 6 % low in the appendix must read why nothing moved.
    import numpy as np
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    rng = np.random.default_rng(0)

    def runs(slow):
        out = []
        for number in range(42):
            control = number % 7 == 0
            value = 100.0 * (1.0 if control else 1.02) * (1 + 0.01 * rng.standard_normal()) * (0.94 if number in slow else 1)
            out.append(("baseline-deployed", "baseline-deployed", "k0", {}, value, number) if control else
                       ("probe", f"c{number % 4}", f"k{1 + number % 4}", {"env": {"C": str(number % 4)}}, value, number))
        return out

    _study(storage, "rough", runs({21}))
    _study(storage, "smooth", runs(set()))
    rough, smooth = study_data(storage, "rough"), study_data(storage, "smooth")
    assert rough.stragglers == {21} and smooth.stragglers == frozenset()
    assert main(["leaderboard", "rough", "--storage", storage]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Stragglers left out: trial 21 (baseline-deployed)" in out, out
    assert any(note.startswith("Stragglers left out: trial 21") for note in report_data(rough).board_notes)
    statuses = {row["trial"]: row["status"] for row in report_data(rough).appendix}
    assert statuses[21] == "ok (straggler, left out)" and statuses[14] == "ok"
    assert main(["leaderboard", "smooth", "--storage", storage]) == 0
    assert "Straggler" not in capsys.readouterr().out
    assert not any("Straggler" in note for note in report_data(smooth).board_notes)
    # The timeline draws it apart, and its drift line, like the estimates, reads the controls without it.
    figure = figure_data(rough)
    assert {p.trial for p in figure.timeline if p.kind == STRAGGLER} == {21}
    slow = next(p for p in figure.timeline if p.trial == 21)
    level = min(figure.drift, key=lambda d: abs(d[0] - slow.minutes))[1]
    assert level > slow.value * 1.03  # the line passes about 6 % above the slow control, not through it
    assert STRAGGLER in {t.name for t in draw(figure)["timeline"].data}
    assert not any(p.kind == STRAGGLER for p in figure_data(smooth).timeline)
    from flagopt.dashboard import live_note  # optuna-dashboard's study note says it too
    assert "Stragglers left out: trial 21" in live_note(rough) and "Straggler" not in live_note(smooth)
