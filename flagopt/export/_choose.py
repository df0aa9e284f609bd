"""Which run to export: the confirmed winner by default, a named trial, or else the best arm, marked UNCONFIRMED."""

from __future__ import annotations

from dataclasses import dataclass

from flagopt.errors import StudyError
from flagopt.study import Arm, RunRecord, StudyData, gain_text


@dataclass(frozen=True)
class Choice:
    """The run whose environment is exported, and the evidence behind it."""

    record: RunRecord
    label: str
    confirmed: bool
    why: str  # one line: what the study says about this configuration
    gain: float | None = None
    ci: tuple[float, float] | None = None
    runs: int = 0
    verdict: str = "unknown"
    #: How many of ``runs`` the gain comes from: the runs after the one that selected the arm (0: all of them).
    fresh_runs: int = 0
    all_runs_gain: float | None = None
    all_runs_ci: tuple[float, float] | None = None

    @property
    def headline(self) -> str:
        """``CONFIRMED`` / ``UNCONFIRMED`` plus the gain line, for the top of every export."""
        state = "CONFIRMED" if self.confirmed else "UNCONFIRMED"
        gain = gain_text(self.gain, self.ci, self.runs, fresh_runs=self.fresh_runs)
        return f"{state}: {self.label} (trial {self.record.number}) {gain}; {self.why}"


def _from_arm(arm: Arm | None, record: RunRecord, *, confirmed: bool, why: str) -> Choice:
    # The gain an engineer acts on comes from the runs that did not select the arm (statistics.md §11).
    est = arm.reported if arm is not None else None
    every = arm.estimate if arm is not None else None
    # The arm's successful runs share one environment; prefer one over a failed first attempt.
    shown = arm.runs[0] if arm is not None and arm.runs and not record.ok else record
    return Choice(record=shown, label=arm.label if arm is not None else record.label, confirmed=confirmed, why=why,
                  gain=est.gain if est else record.gain, ci=(est.lo, est.hi) if est else None,
                  runs=arm.n if arm is not None else int(record.ok), verdict=arm.verdict if arm is not None else "unknown",
                  fresh_runs=arm.fresh_runs if arm is not None else 0,
                  all_runs_gain=every.gain if every else None, all_runs_ci=(every.lo, every.hi) if every else None)


def choose(data: StudyData, trial: int | None = None) -> Choice:
    """The run to export from ``data``.

    Args:
        data: the study.
        trial: a trial number to export instead of the study's winner.

    Raises:
        StudyError: the trial does not exist or is not a flagopt trial, or nothing has a measured gain yet.
    """
    winner = data.winner
    verdict = data.verdict or {}
    if trial is not None:
        record = data.record(trial)
        if record is None:
            numbers = [r.number for r in data.all_records]
            known = f"{min(numbers)}-{max(numbers)}" if numbers else "none"
            raise StudyError(data.name, f"trial {trial}", f"no such flagopt trial (trials in this study: {known})")
        if not record.attrs.get("env") and not record.attrs.get("settings"):
            raise StudyError(data.name, f"trial {trial}", "the trial recorded no settings or environment to export")
        arm = data.arm_of_trial(trial)
        confirmed = bool(winner) and winner.get("config_key") == record.config_key
        why = f"verdict {verdict.get('reason')}: {verdict.get('message')}" if confirmed else (
            f"trial {trial} was asked for by number; its configuration is not the study's confirmed winner")
        return _from_arm(arm, record, confirmed=confirmed, why=why)
    if winner:
        number = int(winner["trial"])
        record = data.record(number)
        if record is None:
            raise StudyError(data.name, "flagopt.verdict.winner", f"names trial {number}, which is not in the study")
        return _from_arm(data.arm_of_trial(number), record, confirmed=True,
                         why=f"verdict {verdict.get('reason')}: {verdict.get('message')}")
    best = data.best_arm
    if best is None:
        raise StudyError(data.name, None, "no configuration has a measured gain yet: run more trials "
                         "(python -m flagopt run), or export one with --trial N")
    state = f"verdict {verdict['reason']}: {verdict['message']}" if verdict else "the study has no verdict yet"
    return _from_arm(best, best.runs[0] if best.runs else best.first, confirmed=False,
                     why=f"best estimate so far, not a confirmed winner ({state})")
