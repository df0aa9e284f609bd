"""The runs of a chosen winner made after its choice: what its claim is read from (docs/statistics.md §11).

Among several confirmed winners the leader is the one whose fresh runs read high, so a claim read from those runs is
high by selection (win10 seeds 0-29: +1.2 pp above the truth, 22 of 30 intervals covering it). Before a win verdict
the chosen winner runs ``SETTLE_RUNS`` times more, one after another; its claim comes from those runs alone
(:attr:`~flagopt.decide.Arm.settled`), and confirmation keeps the fresh runs made before the choice. A budget
verdict has no runs after its choice: its pick's claim is pulled toward its close rivals' instead (:func:`pulled_claim`).

Example:
    >>> settling([], [], room=10) is None  # no winner is being settled
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from flagopt import stats
from flagopt.decide._arms import SETTLE, SETTLE_RUNS, Arm
from flagopt.decide._plan import Plan, arm_summary, config_of


def settle_run(leader: Arm, in_flight: Sequence[Plan], *, room: int) -> Plan | str | None:
    """Before a win verdict on ``leader``: its next run after the choice, ``"wait"`` while the last of them is in flight
    (several slots), or ``None`` once it has them or ``room`` (the runs the budget has left; 0 once its hours are
    spent) cannot hold them and the control that brackets them."""
    done = sum(1 for r in leader.runs if r.attrs.get("phase") == SETTLE)
    flying = sum(1 for p in in_flight if p.repeat_of == leader.first.number and p.attrs.get("phase") == SETTLE)
    if done >= SETTLE_RUNS or room < SETTLE_RUNS - done + 1:
        return None
    if done + flying >= SETTLE_RUNS:
        return "wait"
    return Plan(config_of(leader.first), "repeat", f"settling {leader.label}: a run after its choice",
                repeat_of=leader.first.number, attrs={"phase": SETTLE})


def settling(arms: Sequence[Arm], in_flight: Sequence[Plan], *, room: int) -> Plan | str | None:
    """The next run of a winner whose runs after the choice began (:func:`settle_run`): they come one after another,
    not with the race in between (a first one that read low reopened it for seven runs on win10-3)."""
    for arm in arms:
        if arm.settled is None and any(r.attrs.get("phase") == SETTLE for r in arm.runs):
            return settle_run(arm, in_flight, room=room)
    return None


def pulled_claim(pick: Arm, raced: Sequence[Arm]) -> tuple[stats.ArmEstimate, dict[str, Any], str]:
    """A budget pick's claim, its verdict summary and the words that say how it was read: its fresh runs' gain pulled
    toward its rivals': the other ``raced`` arms (every arm with a claim: the pick was made among them) whose interval
    reaches its own (:func:`flagopt.stats.shrunk_for_selection`).

    Its fresh runs chose it too: they confirmed it where others' did not, and read highest of those they cannot tell
    apart (rand-below-1024: eight confirmed arms of true +3.4 to +3.8 %, the pick's five fresh runs +5.1 % [+4.2,
    +5.9], true +3.8 %; below5 at 3 % run noise, seed 15: the one arm confirmed, +7.1 % [+2.9, +11.2], true +3.5 %).
    The summary keeps their own reading under ``selection``.
    """
    own = pick.claim
    assert own is not None
    others = [a.claim for a in raced if a is not pick and a.claim is not None and math.isfinite(a.claim.se)
              and a.claim.se > 0 and a.claim.hi >= own.lo]  # its rivals: the arms its runs cannot tell it apart from
    est = stats.shrunk_for_selection([own, *others], 0)
    if est.gain >= own.gain:
        return own, arm_summary(pick), ""
    summary = {**arm_summary(pick), "gain": est.gain, "ci": [est.lo, est.hi],
               "selection": {"among": len(others) + 1, "fresh_runs_gain": own.gain, "fresh_runs_ci": [own.lo, own.hi]}}
    return est, summary, (f", read {own.gain:+.1%} by them and pulled toward the {len(others)} other re-run "
                          "configurations their runs cannot tell apart from it")
