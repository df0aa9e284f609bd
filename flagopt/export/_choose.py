"""Which run to export: the confirmed winner by default, or a trial asked for by number (marked UNCONFIRMED unless it
is the winner). Without a confirmed winner there is nothing to deploy: :class:`NoWinner` says "keep the deployed job".
"""

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
    #: why the numerics guard flagged this configuration (its final loss drifted from the baseline's), if it did
    numerics: str | None = None

    @property
    def headline(self) -> str:
        """``CONFIRMED`` / ``UNCONFIRMED`` plus the gain line, for the top of every export."""
        state = "CONFIRMED" if self.confirmed else "UNCONFIRMED"
        gain = gain_text(self.gain, self.ci, self.runs, fresh_runs=self.fresh_runs)
        return f"{state}: {self.label} (trial {self.record.number}) {gain}; {self.why}"

    @property
    def numerics_warning(self) -> str | None:
        """One line when the numerics guard flagged the configuration: it is never exported silently."""
        if not self.numerics:
            return None
        return (f"NUMERICS FLAGGED: {self.numerics}; check the loss curve against the deployed job's before "
                "deploying")


class NoWinner(StudyError):
    """The study confirmed no configuration: keep the deployed job (``export --trial N`` trials one anyway)."""


def _from_arm(data: StudyData, arm: Arm | None, record: RunRecord, *, confirmed: bool, why: str) -> Choice:
    # The winner's gain comes from the runs that did not select it (statistics.md §11); any other arm's from all
    # its runs: the number the leaderboard and `status` show for it.
    est, fresh_runs = data.shown(arm) if arm is not None else (None, 0)
    every = arm.estimate if arm is not None else None
    # The arm's successful runs share one environment; prefer one over a failed first attempt.
    shown = arm.runs[0] if arm is not None and arm.runs and not record.ok else record
    return Choice(record=shown, label=arm.label if arm is not None else record.label, confirmed=confirmed, why=why,
                  gain=est.gain if est else record.gain, ci=(est.lo, est.hi) if est else None,
                  runs=arm.n if arm is not None else int(record.ok), verdict=arm.verdict if arm is not None else "unknown",
                  fresh_runs=fresh_runs,
                  all_runs_gain=every.gain if every else None, all_runs_ci=(every.lo, every.hi) if every else None,
                  numerics=_numerics_of(arm, record))


def _numerics_of(arm: Arm | None, record: RunRecord) -> str | None:
    runs = arm.runs if arm is not None else (record,)
    return next((str(r.attrs["numerics_flag"]) for r in runs if r.attrs.get("numerics_flag")), None)


def choose(data: StudyData, trial: int | None = None) -> Choice:
    """The run to export from ``data``.

    Args:
        data: the study.
        trial: a trial number to export instead of the study's winner.

    Raises:
        NoWinner: no ``trial`` was asked for and the study confirmed no winner (keep the deployed job).
        StudyError: the trial does not exist or is not a flagopt trial.
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
        return _from_arm(data, arm, record, confirmed=confirmed, why=why)
    if winner:
        number = int(winner["trial"])
        record = data.record(number)
        if record is None:
            raise StudyError(data.name, "flagopt.verdict.winner", f"names trial {number}, which is not in the study")
        return _from_arm(data, data.arm_of_trial(number), record, confirmed=True,
                         why=f"verdict {verdict.get('reason')}: {verdict.get('message')}")
    state = f"verdict {verdict['reason']}: {verdict['message']}" if verdict else "the study has no verdict yet"
    best = data.best_arm
    lead = ""
    shown, fresh_runs = data.shown(best) if best is not None else (None, 0)
    if best is not None and shown is not None:
        lead = (f" The best estimate so far is {best.label} (trial {best.first.number}) "
                f"{gain_text(shown.gain, (shown.lo, shown.hi), best.n, fresh_runs=fresh_runs)}, not confirmed; to trial "
                f"it anyway: python -m flagopt export {data.name} --trial {best.first.number} (the patch says "
                "UNCONFIRMED).")
        flagged = _numerics_of(best, best.first)
        if flagged:
            lead += f" Its NUMERICS were FLAGGED: {flagged}."
    raise NoWinner(data.name, None, f"no confirmed winner, so nothing to deploy: keep the deployed job ({state}).{lead}")
