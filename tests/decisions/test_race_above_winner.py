"""Against a confirmed winner, an arm measured wholly above the race's target is re-run first.

rand-win-flaky-140011 (a held-out random landscape on flaky infrastructure, at ad58c41): the winner (+11.4 % on its
runs) was confirmed; double buffering added to it read +14.7 % on two runs, one short of the three a claim needs.
The race ranks arms by how close they sit to its target (the winner's gain and half the minimum effect, in units of
their own uncertainty), so a drop-one variant at the winner's gain took the last four runs, and the study ended on
the winner, true +10.5 % of a best +14.1 %. The arm that can change the decision is the one above the target.
"""

from __future__ import annotations

from dataclasses import replace

from flagopt.decide import Planner, arms_of, settings_of_record
from tests.decisions.records import OVERLAP_PROTO_SPACE, run, space_of

WINNER = {"overlap": 4}
NEAR = {"overlap": 4, "proto": "Simple"}  # one run at the winner's gain: straddles the race's target
HIGHER = {"overlap": 4, "proto": "LL128"}  # two runs 6 points above the winner


def _race(tmp_path, higher):
    """The planner's candidates and its pick after the winner's confirmation, a near variant's one run and
    ``higher``'s runs of the higher arm."""
    space = space_of(tmp_path, OVERLAP_PROTO_SPACE)
    runs = [({}, 100.0), ({"overlap": 2}, 101.0), ({"overlap": 3}, 101.5), (WINNER, 106.0), ({}, 100.1),
            ({"proto": "Simple"}, 100.2), ({"proto": "LL128"}, 100.6), (WINNER, 106.2), (WINNER, 105.9),
            (WINNER, 106.1), ({}, 99.9), (NEAR, 106.3)] + [(HIGHER, v) for v in higher] + [({}, 100.0)]
    records = [run(space, number, settings, value) for number, (settings, value) in enumerate(runs)]
    first: dict[str, int] = {}
    for i, rec in enumerate(records):
        if rec.config_key and first.setdefault(rec.config_key, rec.number) != rec.number:
            records[i] = replace(rec, kind="repeat")
    planner = Planner(space)
    planner._sigma = 0.005
    planner._model = planner.model(records)
    arms = arms_of(records, space.noise)
    leader = planner.leader(arms)
    candidates = planner.candidates(arms, [])
    return planner, arms, leader, candidates


def settings(planner, arm):
    return settings_of_record(planner.space, arm.first.attrs["settings"])


def test_an_arm_wholly_above_the_target_is_raced_before_one_at_the_winners_gain(tmp_path):
    planner, arms, leader, candidates = _race(tmp_path, higher=(112.6, 111.6))
    assert leader is not None and settings(planner, leader) == WINNER
    assert {frozenset(settings(planner, a).items()) for a in candidates} >= {frozenset(NEAR.items()),
                                                                            frozenset(HIGHER.items())}
    assert settings(planner, planner.pick_candidate(candidates, arms, leader)) == HIGHER

