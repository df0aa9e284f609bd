"""Around a confirmed winner (issue 25 item 3: drop-one, add-one around the incumbent):

* a numeric setting chosen from single probes is moved one step to its neighbour (a short line search): its value
  beat the neighbour by less than a run's noise, and the neighbour can be worth more in company (pp64: overlap
  limit 4 won its probe by luck; 3 was 1.5 points better with the rest);
* a setting the model predicts to add anything at all is tried on top of it, even below half a run's noise (win10,
  pair: the winner alone ended 1-1.5 points short of the best, which its small companions make up);
* once nothing left is predicted above zero, a setting within one standard error of zero still is (ppmb-1003: a
  control 2 % high put the +1.2 to +2 % settings screened after it below zero), but not one the runs rule out;
* a categorical setting is swapped for a rival value the runs cannot tell from it (rand-below-1027: NVLS beat Tree
  in one probe each, by noise, and Tree was worth 1.9 points more), but not for one they show clearly worse.
* the winner's companions not ruled out run in a balanced two-level design on top of it, so every run informs
  each of them (one add-one run per companion told +0.3-0.8 % settings apart no better than their probes did).
"""

from __future__ import annotations

import textwrap

from flagopt.decide import Planner, RunRecord, arms_of, config_of_settings, settings_of_record
from flagopt.space import load_space

SPACE = """
    name: m
    command: [python, -c, pass]
    params:
      overlap: {xla: xla_gpu_experimental_parallel_collective_overlap_limit, choices: [1, 2, 3, 4]}
      proto: {env: NCCL_PROTO, choices: [Simple]}
      pipe: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
    baseline:
      xla_flags: "--xla_gpu_experimental_parallel_collective_overlap_limit=1"
"""


def run(space, number, settings, value, *, design="probe", kind="probe"):
    config = config_of_settings(space, settings, kind="probe", profile="p")
    attrs = {"settings": config.settings(), "design": design, "started_at": float(number)}
    if not settings:
        kind = "baseline-deployed"
    return RunRecord(number, kind, kind if not settings else "p", config.config_key if settings else "", "ok",
                     value, float(number), None, attrs=attrs)


def history(space, probes, pipe, rivals=None):
    """Controls, one probe per value (``probes``: overlap value -> tokens/s; ``pipe``: the pipelining probe;
    ``rivals``: other NCCL protocols -> tokens/s), and a winner of overlap 4 + Simple confirmed on four runs."""
    runs = [({}, 100.0, "probe", "probe")]
    runs += [({"proto": value}, measured, "probe", "probe") for value, measured in (rivals or {}).items()]
    runs += [({"overlap": value}, measured, "probe", "probe") for value, measured in probes.items()]
    runs += [({}, 100.1, "probe", "probe"), ({"proto": "Simple"}, 102.0, "probe", "probe"),
             ({"pipe": True}, pipe, "probe", "probe")]
    winner = {"overlap": 4, "proto": "Simple"}
    runs += [(winner, 107.0, "combination", "probe")] + [(winner, v, "", "repeat") for v in (106.8, 107.2, 106.9)]
    runs.append(({}, 99.9, "probe", "probe"))
    return [run(space, i, settings, value, design=design, kind=kind)
            for i, (settings, value, design, kind) in enumerate(runs)]


def next_step(tmp_path, probes, pipe=99.0, sigma=0.005, rivals=None):
    path = tmp_path / "m.yaml"
    text = textwrap.dedent(SPACE)
    if rivals:
        text = text.replace("choices: [Simple]", f"choices: [Simple, {', '.join(rivals)}]")
    path.write_text(text)
    space = load_space(path)
    records = history(space, probes, pipe, rivals)
    planner = Planner(space)
    planner._sigma = sigma
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    leader = planner.leader(arms)
    assert leader is not None and settings_of_record(space, leader.first.attrs["settings"])["overlap"] == 4
    return space, planner.next_screen(records, arms, [], leader)


def test_the_winner_s_overlap_limit_is_tried_one_step_down(tmp_path):
    space, step = next_step(tmp_path, {2: 103.0, 3: 104.3, 4: 104.6})
    assert step is not None and step[2] == "move-one", step
    assert settings_of_record(space, step[0].settings()) == {"overlap": 3, "proto": "Simple"}


def test_no_move_to_a_neighbour_the_runs_show_clearly_worse(tmp_path):
    space, step = next_step(tmp_path, {2: 101.0, 3: 96.0, 4: 104.6})
    assert step is None or step[2] != "move-one", step


def test_a_small_predicted_gain_is_added_to_the_winner(tmp_path):
    # run noise 1 %: the pipelining probe (+0.4 %) is below half of it, which held add-one back before a winner
    space, step = next_step(tmp_path, {2: 103.0, 3: 96.0, 4: 104.6}, pipe=100.5, sigma=0.01)
    assert step is not None and step[2] == "add-one", step
    assert settings_of_record(space, step[0].settings()) == {"overlap": 4, "proto": "Simple", "pipe": True}


def test_a_setting_not_ruled_out_is_added_once_nothing_is_above_zero(tmp_path):
    # the pipelining probe measured 0.3 % below the baseline under 1 % run noise: below zero, not ruled out
    space, step = next_step(tmp_path, {2: 103.0, 3: 96.0, 4: 104.6}, pipe=99.7, sigma=0.01)
    assert step is not None and step[2] == "add-one", step
    assert settings_of_record(space, step[0].settings()) == {"overlap": 4, "proto": "Simple", "pipe": True}


def test_a_setting_the_runs_rule_out_is_not_added(tmp_path):
    space, step = next_step(tmp_path, {2: 103.0, 3: 96.0, 4: 104.6}, pipe=94.0, sigma=0.01)
    assert step is None or "pipe" not in settings_of_record(space, step[0].settings()), step


def test_the_winner_s_protocol_is_swapped_for_a_rival_the_runs_cannot_tell_apart(tmp_path):
    # overlap 3 is ruled out and the pipelining probe too: what is left to try is LL128, 0.3 % below Simple alone
    space, step = next_step(tmp_path, {2: 103.0, 3: 96.0, 4: 104.6}, pipe=94.0, rivals={"LL128": 101.7, "LL": 95.0})
    assert step is not None and step[2] == "move-one", step
    assert settings_of_record(space, step[0].settings()) == {"overlap": 4, "proto": "LL128"}


def test_no_swap_for_a_protocol_the_runs_show_clearly_worse(tmp_path):
    space, step = next_step(tmp_path, {2: 103.0, 3: 96.0, 4: 104.6}, pipe=94.0, rivals={"LL128": 95.5, "LL": 95.0})
    assert step is None or step[2] != "move-one", step


def test_a_contender_near_the_win_bar_is_looked_around_before_the_race_confirms_it(tmp_path):
    """One run of overlap 4 + Simple at +6 %: overlap 3, one probe's noise behind 4, is tried in its place already."""
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(SPACE))
    space = load_space(path)
    runs = [({}, 100.0), ({"overlap": 2}, 103.0), ({"overlap": 3}, 104.3), ({"overlap": 4}, 104.6), ({}, 100.1),
            ({"proto": "Simple"}, 102.0), ({"pipe": True}, 94.0), ({"overlap": 4, "proto": "Simple"}, 106.0),
            ({}, 99.9)]
    records = [run(space, i, settings, value, design="combination" if len(settings) > 1 else "probe")
               for i, (settings, value) in enumerate(runs)]
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    assert planner.leader(arms) is None and planner.contender(arms) is not None
    step = planner.next_screen(records, arms, [], None)
    assert step is not None and step[2] == "move-one", step
    assert settings_of_record(space, step[0].settings()) == {"overlap": 3, "proto": "Simple"}


COMPANIONS = SPACE.replace("""      pipe: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
""", """      pipe: {xla: xla_gpu_enable_pipelined_all_gather, choices: [true]}
      rs: {xla: xla_gpu_enable_pipelined_reduce_scatter, choices: [true]}
      ar: {xla: xla_gpu_enable_pipelined_all_reduce, choices: [true]}
""")


def test_the_winner_s_companions_run_in_a_balanced_design_on_top_of_it(tmp_path):
    """Three settings beside a confirmed winner, measured once each under 1 % noise: +0.3 %, -0.2 % (neither ruled
    out) and -6 % (ruled out). The two not ruled out run in the rows of a 4-run two-level design on top of the
    winner (both, each alone; the row with neither is the winner itself), the one ruled out in none."""
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(COMPANIONS))
    space = load_space(path)
    winner = {"overlap": 4, "proto": "Simple"}
    runs = [({}, 100.0, "probe", "probe"), ({"overlap": 2}, 101.0, "probe", "probe"),
            ({"overlap": 3}, 96.0, "probe", "probe"), ({"overlap": 4}, 104.6, "probe", "probe"),
            ({"proto": "Simple"}, 102.0, "probe", "probe"), ({}, 100.1, "probe", "probe"),
            ({"pipe": True}, 100.3, "probe", "probe"), ({"rs": True}, 99.8, "probe", "probe"),
            ({"ar": True}, 94.0, "probe", "probe"), (winner, 107.0, "combination", "probe")]
    runs += [(winner, v, "", "repeat") for v in (106.8, 107.2, 106.9)] + [({}, 99.9, "probe", "probe")]
    records = [run(space, i, settings, value, design=design, kind=kind)
               for i, (settings, value, design, kind) in enumerate(runs)]
    planner = Planner(space)
    planner._sigma = 0.01
    rows = []
    for _ in range(4):
        planner._model = planner.model(records)
        arms = arms_of(records, space.noise)
        leader = planner.leader(arms)
        assert leader is not None
        step = planner.next_screen(records, arms, [], leader)
        if step is None or step[2] != "companions":
            break
        settings = settings_of_record(space, step[0].settings())
        rows.append(sorted(set(settings) - set(winner)))
        records.append(run(space, len(records), settings, 107.0, design="companions"))
    assert sorted(rows) == [["pipe"], ["pipe", "rs"], ["rs"]]
    assert step is None or step[2] != "companions"  # the design is complete; the pooled effects decide the rest
