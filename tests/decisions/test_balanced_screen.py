"""The balanced screen (issue 25 item 2: balanced designs where they pay).

Before any winner, once the first combination has run and no configuration is near the win bar, the settings the
one-factor probes have not ruled out run in the rows of a two-level Hadamard design: every row informs every one of
their effects. The rows are not raced (the model's next combination carries what they found), and no null verdict is
drawn while a row is still to run (rand-below ended `null` with half its rows unrun and its +2 % setting measured once).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace

from flagopt import stats
from flagopt.decide import Planner, RunRecord, arms_of, config_of_settings, settings_of_record
from flagopt.decide._pairs import PAIRS
from flagopt.space import load_space

SPACE = """
    name: m
    command: [python, -c, pass]
    params:
      ag: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      rs: {xla: xla_gpu_enable_pipelined_reduce_scatter, choices: [true]}
      ar: {xla: xla_gpu_enable_pipelined_all_reduce, choices: [true]}
      p2p: {xla: xla_gpu_enable_pipelined_p2p, choices: [true]}
      dbuf: {xla: xla_gpu_enable_while_loop_double_buffering, choices: [true]}
      proto: {env: NCCL_PROTO, choices: [Simple]}
    stop: {max_null: 7}
"""
FACTORS = ("ag", "rs", "ar", "p2p", "dbuf")


def run(space, number, settings, value, *, design="probe"):
    config = config_of_settings(space, settings, kind="probe", profile="p")
    attrs = {"settings": config.settings(), "design": design, "started_at": float(number)}
    kind = "probe" if settings else "baseline-deployed"
    return RunRecord(number, kind, "p" if settings else kind, config.config_key if settings else "", "ok",
                     value, float(number), None, attrs=attrs)


def screened(tmp_path, probe_values, combination):
    """Controls, one probe per setting (``probe_values``: name -> tokens/s over a deployed 100), NCCL_PROTO=Simple
    at -6 % (ruled out), and the combination of the five settings measured once at ``combination``."""
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(SPACE))
    space = load_space(path)
    runs = [({}, 100.0, "probe")] + [({n: True}, v, "probe") for n, v in probe_values.items()]
    runs += [({}, 100.1, "probe"), ({"proto": "Simple"}, 94.0, "probe"),
             ({n: True for n in FACTORS}, combination, "combination"), ({}, 99.9, "probe")]
    records = [run(space, i, settings, value, design=design) for i, (settings, value, design) in enumerate(runs)]
    planner = Planner(space)
    planner._sigma = 0.01
    return space, planner, records


def design_rows(space, planner, records, value=100.5, design="balanced"):
    """Run the rows of ``design`` as the planner proposes them (each measured at ``value``)."""
    rows = []
    for _ in range(10):
        planner._model = planner.model(records)
        arms = arms_of(records, space.noise)
        step = planner.next_screen(records, arms, [], None)
        if step is None or step[2] != design:
            break
        settings = settings_of_record(space, step[0].settings())
        rows.append(frozenset(settings))
        records.append(run(space, len(records), settings, value, design=design))
    return rows


def raced(space, records, values):
    """``records`` with the combination re-run at each of ``values``, a control after each."""
    combination = next(r for r in records if r.attrs.get("design") == "combination")
    for value in values:
        records.append(replace(combination, number=len(records), kind="repeat", gain=None, steady=value,
                               t=float(len(records)), attrs={**combination.attrs, "started_at": float(len(records))}))
        records.append(run(space, len(records), {}, 100.0))
    return records


def test_the_settings_not_ruled_out_run_in_a_balanced_design_after_the_combination(tmp_path):
    """Five +0.4 to +1 % settings measured once each (under 1 % noise), one at -6 %: the five run in an 8-run
    two-level design, each set in four of its eight rows; the -6 % one in none."""
    space, planner, records = screened(tmp_path, {"ag": 101.0, "rs": 100.8, "ar": 100.6, "p2p": 100.5,
                                                  "dbuf": 100.4}, combination=102.5)
    rows = design_rows(space, planner, records)
    # two of its eight rows ran already: all five (the combination), and the largest alone (its probe)
    assert len(rows) == 6 and len(set(rows)) == 6
    full = rows + [frozenset(FACTORS), frozenset({"ag"})]
    assert all(sum(name in row for row in full) == 4 for name in FACTORS)
    assert all(len(row) >= 2 and row <= set(FACTORS) for row in rows)
    # its rows inform the effects, they are not raced for themselves
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    assert not [a for a in planner.candidates(arms, []) if a.first.attrs.get("design") == "balanced"]


def test_no_balanced_screen_while_a_configuration_is_near_the_win_bar(tmp_path):
    """A combination measured at +7 %: the race confirms it, no design runs first."""
    space, planner, records = screened(tmp_path, {"ag": 103.0, "rs": 101.5, "ar": 101.0, "p2p": 100.5,
                                                  "dbuf": 100.4}, combination=107.0)
    planner._model = planner.model(records)
    step = planner.next_screen(records, arms_of(records, space.noise), [], None)
    assert step is None or step[2] != "balanced"


def test_no_null_verdict_while_a_row_of_the_balanced_screen_is_unrun(tmp_path):
    """Nothing matters (every run within 0.3 % of the deployed job) and seven distinct configurations are measured
    (max_null 7): the null verdict waits for the design's rows, then for the rows that set the booleans' pairs no
    row set together (_pairs.py), and comes once they are in."""
    space, planner, records = screened(tmp_path, {"ag": 100.2, "rs": 99.9, "ar": 100.1, "p2p": 99.8,
                                                  "dbuf": 100.0}, combination=100.1)
    planner._model = planner.model(records)
    assert planner.balanced_pending(records, arms_of(records, space.noise))
    assert planner.stop_verdict(records, arms_of(records, space.noise)) is None
    rows = design_rows(space, planner, records, value=100.0)
    assert rows
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    assert not planner.balanced_pending(records, arms)
    assert planner.pair_row_due(records, arms) is not None  # the booleans' pairs: dbuf never ran with ag, ...
    assert planner.stop_verdict(records, arms) is None
    assert design_rows(space, planner, records, value=94.0, design=PAIRS)  # as their parts add up: Simple -6 %
    assert planner.pair_row_due(records, arms_of(records, space.noise)) is None
    records.append(run(space, len(records), {}, 100.0))  # the drift control after them
    planner._model = planner.model(records)
    verdict = planner.stop_verdict(records, arms_of(records, space.noise))
    assert verdict is not None and verdict.reason == "null", verdict


def test_no_null_verdict_before_the_combination_the_balanced_screen_follows(tmp_path):
    """Six distinct configurations measured (max_null 6), all one-factor probes within 0.5 % of the deployed job: no
    run set two settings, so none could show a pair that only helps together (rand-below-12011 ended `null` so, its
    +3.2 % pair never run). The null verdict waits for the combination and the balanced screen after it."""
    space, planner, records = screened(tmp_path, {"ag": 100.5, "rs": 100.3, "ar": 100.2, "p2p": 99.9,
                                                  "dbuf": 100.4}, combination=100.0)
    space = replace(space, stop=replace(space.stop, max_null=6))
    planner.space = space
    records = [r for r in records if r.attrs.get("design") != "combination"]
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    assert planner.balanced_pending(records, arms)
    assert planner.stop_verdict(records, arms) is None
    step = planner.next_screen(records, arms, [], None)
    assert step is not None and step[2] == "combination"
    records.append(run(space, len(records), settings_of_record(space, step[0].settings()), 100.1, design="combination"))
    assert design_rows(space, planner, records, value=100.0)
    assert design_rows(space, planner, records, value=94.0, design=PAIRS)  # the pairs no row set (parts add up)
    records.append(run(space, len(records), {}, 100.0))  # and a drift control after them
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    verdict = planner.stop_verdict(records, arms)
    assert verdict is not None and verdict.reason == "null", verdict


def test_the_design_is_drawn_once_and_a_resumed_study_draws_the_same(tmp_path):
    """After its first two rows a second run of its smallest setting comes out at +2 % (a fresh draw would now rank
    it first, and assign the design's columns anew): the rest of the rows are still the first design's, and a new
    planner on the same runs (a resumed study) proposes them too."""
    probes = {"ag": 101.0, "rs": 100.8, "ar": 100.6, "p2p": 100.5, "dbuf": 100.4}
    space, planner, records = screened(tmp_path, probes, combination=102.5)
    expected = design_rows(space, Planner(space), list(records))
    rows = []
    for i in range(len(expected)):
        if i == 2:
            records.append(run(space, len(records), {"dbuf": True}, 102.0, design="refine"))
            redrawn = Planner(space)
            redrawn._sigma = 0.01
            redrawn._model = redrawn.model(records)
            assert max(redrawn._model.best_values().items(), key=lambda kv: kv[1][1])[0] == "dbuf"
            resumed = Planner(space)
            resumed._sigma = 0.01
            resumed._model = resumed.model(records)
            step = resumed.next_screen(records, arms_of(records, space.noise), [], None)
            assert step is not None and frozenset(settings_of_record(space, step[0].settings())) == expected[2]
        planner._model = planner.model(records)
        step = planner.next_screen(records, arms_of(records, space.noise), [], None)
        assert step is not None and step[2] == "balanced"
        settings = settings_of_record(space, step[0].settings())
        rows.append(frozenset(settings))
        records.append(run(space, len(records), settings, 100.5, design="balanced"))
    assert rows == expected


def test_a_row_above_the_win_bar_is_raced_and_one_below_it_is_not(tmp_path):
    """A row of the design that measures +7 % (an interaction the main effects do not show: rand-win-2 ended `null`
    with such a row unraced) is raced like any configuration and ends the design; a row at +4.5 % (the bar less half a
    sigma, within a lucky run's reach on the null landscape) informs the effects and the design goes on."""
    probes = {"ag": 101.0, "rs": 100.8, "ar": 100.6, "p2p": 100.5, "dbuf": 100.4}
    for value, raced in ((107.0, True), (104.5, False)):
        space, planner, records = screened(tmp_path, probes, combination=102.5)
        planner._model = planner.model(records)
        step = planner.next_screen(records, arms_of(records, space.noise), [], None)
        assert step is not None and step[2] == "balanced"
        records.append(run(space, len(records), settings_of_record(space, step[0].settings()), value,
                           design="balanced"))
        planner._model = planner.model(records)
        arms = arms_of(records, space.noise)
        rows = [a for a in planner.candidates(arms, []) if a.first.attrs.get("design") == "balanced"]
        assert len(rows) == (1 if raced else 0)
        step = planner.next_screen(records, arms, [], None)
        assert (step is None or step[2] != "balanced") if raced else (step is not None and step[2] == "balanced")


def test_a_setting_that_reads_slightly_harmful_alone_still_runs_in_the_rows(tmp_path):
    # rand-win-1012 (a held-out landscape): double buffering and the pipelined reduce-scatter give +6 % together and
    # nothing alone; double buffering's probe read -0.6 +- 0.3 %. Left out of the rows at two standard errors, no
    # run ever set both and the study ended `null` (true best +10.3 %). At three it is in, a row finds the pair.
    from benchmarks._random_landscapes import random_landscape
    from tests.decisions.sim_study import run_study

    land = random_landscape("rand-win", 1012, tmp_path)
    runner, verdict = run_study(land, tmp_path / "study", 1012)
    rows = [settings_of_record(runner.space, r.attrs.get("settings") or {}) for r in runner.records()
            if r.attrs.get("design") == "balanced"]
    assert any("xla_gpu_enable_while_loop_double_buffering" in row for row in rows), rows
    assert verdict.reason == "win", verdict.message
    assert land.true_gain(verdict.winner["settings"]) >= 0.05


def test_a_spare_column_of_the_design_takes_a_setting_ruled_out_by_a_hair(tmp_path):
    """pair-3009: double buffering read -0.8 +- 0.3 % alone, ruled out at three standard errors, and the study ended
    `null` on a +8 % pair it is half of. Four settings take an 8-run design with three columns to spare: they take
    such a setting (in four of the eight rows, the design no larger), never one that lost more than ``null_gain``
    (NCCL_PROTO=Simple at -6 %)."""
    space, planner, records = screened(tmp_path, {"ag": 101.0, "rs": 100.8, "ar": 100.6, "p2p": 100.5,
                                                  "dbuf": 98.8}, combination=102.5)
    planner._sigma = 0.002
    model = planner.model(records)
    value, effect, se = model.best_values()["dbuf"]
    assert -space.stop.null_gain < effect < -3 * se  # ruled out by the screen's three standard errors alone
    rows = planner.design_rows(model, {}, [], records, label="balanced")
    assert len(rows) == 8 and all(size == 8 for _, size in rows)
    assert sum("dbuf" in row for row, _ in rows) == 4
    assert all(sum(name in row for row, _ in rows) == 4 for name in ("ag", "rs", "ar", "p2p"))
    assert not any("proto" in row for row, _ in rows)


def test_a_combination_measured_below_the_win_bar_on_several_runs_no_longer_holds_the_screen_back(tmp_path):
    """A combination at +4.3 % is a contender on one run (within a sigma of the +5 % bar) and the balanced screen
    waits for its race; on four runs its mean is more than sigma/sqrt(4) below the bar, the five settings' rows run.
    rand-win-12017 (held out): its +4.4 % combination stayed a contender for 34 runs, the study ended on `budget`,
    and no row ever set the two settings that pay +4.7 % together; with the rows it won at +9.4 % (best +9.6 %)."""
    probes = {"ag": 101.0, "rs": 100.8, "ar": 100.6, "p2p": 100.5, "dbuf": 100.4}
    space, planner, records = screened(tmp_path, probes, combination=104.3)
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    assert planner.contender(arms) is not None
    step = planner.next_screen(records, arms, [], None)
    assert step is None or step[2] != "balanced"
    records = raced(space, records, (104.2, 104.4, 104.3))
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    assert planner.contender(arms) is None
    step = planner.next_screen(records, arms, [], None)
    assert step is not None and step[2] == "balanced", step


def test_a_row_far_above_the_null_bar_is_raced_not_left_to_the_model(tmp_path):
    """rand-below-9010 (a held-out landscape): NVLS and double buffering read -0.1 % each alone and pay +3 % together.
    The two rows that set both read +4.0 and +4.1 % at 0.5 % run noise; a row only informs the additive model, whose
    next combination could not carry a pair, so neither row ran again and the study ended `null` on a +4 % job. A row
    clear of ``stop.null_gain`` by three run-noise sigmas is raced like any configuration: the study recommends it."""
    from benchmarks._random_landscapes import random_landscape
    from tests.decisions.sim_study import run_study

    land = random_landscape("rand-below", 9010, tmp_path)
    runner, verdict = run_study(land, tmp_path / "study", 9010)
    raced = [r for r in runner.records() if r.kind == "repeat" and r.profile.startswith("balanced screen")]
    assert raced, [(r.number, r.kind, r.profile) for r in runner.records()]
    assert verdict.reason != "null" and verdict.winner is not None, verdict.message
    assert land.true_gain(verdict.winner["settings"]) >= 0.99 * (1 + land.best().gain) - 1


def after_its_race(tmp_path, combination, repeats):
    """The planner, records and arms once a combination measured at ``combination`` was re-run at ``repeats``, and
    the contender it is then."""
    probes = {"ag": 101.0, "rs": 100.8, "ar": 100.6, "p2p": 100.5, "dbuf": 100.4}
    space, planner, records = screened(tmp_path, probes, combination=combination)
    records = raced(space, records, repeats)
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    return planner, records, arms, planner.contender(arms)


def test_a_contender_a_few_tenths_above_the_bar_no_longer_holds_the_screen_back(tmp_path):
    """A combination at +5.3 % on four runs is still within reach of the +5 % bar, but four more runs at that mean
    would not confirm it: the balanced screen's rows run before its long race (rand-win-80019, held out: a +5.5 %
    combination raced for 30 runs and the study ended on `budget`; the +12 % pair was in no row)."""
    planner, records, arms, contender = after_its_race(tmp_path, 105.3, (105.2, 105.4, 105.3))
    assert contender is not None and planner.far_from_confirmed(contender)
    step = planner.next_screen(records, arms, [], None)
    assert step is not None and step[2] == "balanced", step


def test_a_contender_its_next_runs_would_confirm_still_holds_the_screen_back(tmp_path):
    """At +7 % on four runs a few more runs confirm it: no row runs first."""
    planner, records, arms, contender = after_its_race(tmp_path, 107.0, (107.1, 106.9, 107.0))
    assert contender is not None and not planner.far_from_confirmed(contender)
    step = planner.next_screen(records, arms, [], None)
    assert step is None or step[2] != "balanced", step


def test_the_runs_a_contender_needs_and_the_room_the_budget_leaves_decide_whether_the_rows_go_first(tmp_path):
    """+5.5 % on three fresh runs at 1 % run noise needs about twelve more to clear +5 % at 95 %; with half its
    variance from the controls, no number of its own runs would. The rows go first where they fit beside its race
    (room 30) or where its race cannot end anyway (room 10); not where they would leave a race that could end too few
    runs (room 18), nor where they do not fit at all (room 6: flaky-1021 ran three rows in the budget's reserve, and
    a win became a `budget` verdict)."""
    planner, _, _, contender = after_its_race(tmp_path, 105.3, (105.2, 105.4, 105.3))
    sure = stats.ArmEstimate(gain=0.055, lo=0.0, hi=0.0, n=3, sigma=0.01, se=0.01 / math.sqrt(3))
    arm = replace(contender, claim=sure)
    assert 12.0 < planner.runs_to_confirm(arm) < 13.0
    assert planner.runs_to_confirm(replace(contender, claim=replace(sure, baseline_share=0.5))) == math.inf
    assert planner.runs_to_confirm(replace(contender, claim=replace(sure, gain=0.07))) == 0.0
    assert [planner.far_from_confirmed(arm, room) for room in (30, 18, 10, 6)] == [True, False, True, False]
