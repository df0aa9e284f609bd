"""Drift controls: when one is due on a slot (spaced by the drift the controls measure), the control itself, and
whether a slot's last runs are bracketed by one (statistics.md §2, §6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flagopt import stats
from flagopt.decide._arms import Arm, baseline_runs
from flagopt.decide._plan import Plan, config_of, seconds_per_run
from flagopt.decide._runs import BASELINE, RunRecord
from flagopt.space import Space, TrialConfig

#: Runs between two controls at the least: with repeats of other configurations the drift between controls is
#: measured anyway, and a control every other run spent ~40 % of a study on controls.
CONTROL_MIN_GAP = 4
#: Runs between two controls until the drift is measured (three controls), and at the least after that: every
#: sixth run was 17 % of a study's runs on controls, every seventh 15-16 %, every ninth 14 % with the within-1 %
#: and coverage figures kept (seeds 0-29); the effects model reads drift from every run in between.
CONTROL_FIRST_GAP = 9
#: Runs between two controls at the most, where the measured drift allows it (controls <= 15 % of a study's runs).
CONTROL_MAX_GAP = 12


class Controls:
    """Part of :class:`~flagopt.decide.Planner` (through the race): when a drift control is due."""

    space: Space
    _direction: str

    def baseline_due(self, records: Sequence[RunRecord], chosen: Arm | None) -> bool:
        """Whether a drift control is due among ``records`` (one slot's runs)."""
        since = 0
        for rec in reversed(records):
            if rec.is_baseline:
                break
            if rec.status != "invalid":  # runs that never started measured nothing
                since += 1
        if chosen is not None and since >= CONTROL_MIN_GAP and stats.needs_control(chosen.estimate):
            return True
        every = self.space.noise.baseline_every
        if every is None:
            every = stats.drift_interval(baseline_runs(records, self._direction), t_per_trial=seconds_per_run(records),
                                         k_min=CONTROL_FIRST_GAP, k_max=CONTROL_MAX_GAP,
                                         sigma_floor=stats.DEFAULT_NOISE_FLOOR)
        return since >= every

    def rerun(self, arm: Arm, why: str, records: Sequence[RunRecord], slot: str, first: RunRecord,
              attrs: dict[str, Any], *, may_control: bool = True) -> Plan:
        """``arm`` run again on ``slot``, or a drift control there first when one is due and ``may_control`` (not
        while the slot already runs one; ``first``: the study's first successful baseline, the controls' reference)."""
        if may_control and self.baseline_due([r for r in records if r.slot == slot], arm):
            return control("drift control", first, attrs)
        return Plan(config_of(arm.first), "repeat", why, repeat_of=arm.first.number, attrs=attrs)


def control(reason: str, first: RunRecord, attrs: dict[str, Any]) -> Plan:
    """A run of the deployed job: the drift reference (``first``: the study's first successful one)."""
    return Plan(TrialConfig(BASELINE, BASELINE), BASELINE, reason, repeat_of=first.number, attrs=attrs)


def since_last_control(records: Sequence[RunRecord], slot: str) -> list[RunRecord]:
    """The runs measured on ``slot`` after its last successful control: their drift is extrapolated.

    Example:
        >>> since_last_control([], "")
        []
    """
    measured = [r for r in records if r.slot == slot and r.ok]
    last = max((i for i, r in enumerate(measured) if r.is_baseline), default=-1)
    return measured[last + 1:]


def unbracketed(arm: Arm, records: Sequence[RunRecord], slot: str) -> bool:
    """Whether ``arm`` has a run on ``slot`` after the slot's last successful control."""
    after = {r.number for r in since_last_control(records, slot)}
    return any(r.number in after for r in arm.runs)


def ends_on_control(records: Sequence[RunRecord], slot: str) -> bool:
    """Whether the last run measured on ``slot`` is a control (or nothing was measured there yet).

    Example:
        >>> ends_on_control([], "")
        True
    """
    return not since_last_control(records, slot)
