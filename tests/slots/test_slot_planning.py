"""How the planner fills several slots: the screen goes ahead of the results in flight, and runs in flight count
as information on the way (no arm re-run on every free slot at once)."""

from __future__ import annotations

from pathlib import Path

from flagopt import stats
from tests.slots.test_slot_driver import FOUR, study


def _in_flight(records, period: float):
    """(start, end, record) of every run that ran, on the virtual clock."""
    return [(float(r.attrs["started_at"]), float(r.attrs["started_at"]) + period, r)
            for r in records if r.attrs.get("started_at")]


def test_the_screen_goes_ahead_of_its_results_in_flight_only_on_several_slots(tmp_path: Path) -> None:
    runner, executor = study(tmp_path / "four", "pp64", seed=1, slots=FOUR)
    runner.run()
    spans = _in_flight(runner.records(), executor.period_s)
    screen = [(s, e, r.number) for s, e, r in spans if r.attrs.get("design")]
    ahead = [(s, r) for s, _, r in spans if r.attrs.get("ahead")]
    # the combination and the drop-one variants are proposed while probes they depend on still run
    assert {r.attrs["design"] for _, r in ahead} >= {"combination", "drop-one"}
    for start, rec in ahead:
        assert any(s <= start <= e and n < rec.number for s, e, n in screen), rec.label
        assert rec.attrs["reason"].endswith("(ahead of the results in flight)")
    one, _ = study(tmp_path / "one", "pp64", seed=1, slots=("",))
    one.run()
    assert not any(r.attrs.get("ahead") for r in one.records())  # one slot: nothing would idle, nothing speculates


def test_runs_in_flight_count_towards_the_null_race_floor(tmp_path: Path) -> None:
    # A first run just below +2 % on the null landscape is usually ruled out by one run more: before the floor counted the
    # runs in flight, closing 4-slot null studies re-ran such arms on every free slot at once and ran out of budget.
    runner, _ = study(tmp_path, "null", slots=FOUR)
    planner = runner.planner
    target = (runner.space.stop.null_gain, runner.space.stop.win)
    first = stats.ArmEstimate(gain=0.0185, lo=-0.01, hi=0.04, n=1, sigma=0.01, se=0.01, df=4.0)
    assert planner.open_after(first, 1, target, against_null=True)  # two runs' floor: 2 % less sigma/sqrt(2)
    assert not planner.open_after(first, 2, target, against_null=True)  # from three runs it is the 2 % bar itself
    assert planner.open_after(first, 2, target)  # a winner's race has no such floor: only the interval counts
    above = stats.ArmEstimate(gain=0.025, lo=0.0, hi=0.05, n=1, sigma=0.01, se=0.01, df=4.0)
    assert planner.open_after(above, 2, target, against_null=True)
