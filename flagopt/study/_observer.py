"""What the driver tells the world while a study runs: a small observer interface.

The driver knows nothing above it. The CLI wires the console progress (:class:`flagopt.study.Progress`) and the
live dashboard view (:class:`flagopt.dashboard.LiveView`) to these events; a benchmark passes a quiet one.

Example:
    >>> class Count(StudyObserver):
    ...     def __init__(self): self.told_trials = []
    ...     def told(self, study, number, plan, collected): self.told_trials.append(number)
    >>> watcher = Observers(Count(), StudyObserver())
    >>> watcher.told(None, 3, None, None)
    >>> watcher.observers[0].told_trials
    [3]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna

    from flagopt.study._collect import Collected
    from flagopt.decide import Plan, Verdict


class StudyObserver:
    """The events of a study run; every method does nothing here, so an observer overrides only what it uses."""

    def say(self, text: str) -> None:
        """Something the user must hear even when quiet (a changed space accepted, a new epoch)."""

    def note(self, text: str) -> None:
        """A side remark (a re-attached job, a run not started, a job left running)."""

    def launched(self, number: int, plan: Plan, job_id: str) -> None:
        """Trial ``number`` was submitted as job ``job_id``."""

    def waiting(self, number: int, trial_dir: str, final_step: int, best: str) -> None:
        """The driver polls while trial ``number`` (the oldest in flight) runs to ``final_step``; ``best``: the best arm so far."""

    def told(self, study: optuna.Study, number: int, plan: Plan, collected: Collected) -> None:
        """Trial ``number`` ended and its result is stored on ``study``."""

    def verdict(self, study: optuna.Study, verdict: Verdict | None) -> None:
        """The loop ended: the stop verdict (None: out of launches without a decision) and the arms are stored."""

    def close(self) -> None:
        """The run is over (also after an error)."""


class Observers(StudyObserver):
    """Several observers, told in the order given."""

    def __init__(self, *observers: StudyObserver) -> None:
        self.observers = observers

    def say(self, text: str) -> None:
        for o in self.observers:
            o.say(text)

    def note(self, text: str) -> None:
        for o in self.observers:
            o.note(text)

    def launched(self, number: int, plan: Plan, job_id: str) -> None:
        for o in self.observers:
            o.launched(number, plan, job_id)

    def waiting(self, number: int, trial_dir: str, final_step: int, best: str) -> None:
        for o in self.observers:
            o.waiting(number, trial_dir, final_step, best)

    def told(self, study: optuna.Study, number: int, plan: Plan, collected: Collected) -> None:
        for o in self.observers:
            o.told(study, number, plan, collected)

    def verdict(self, study: optuna.Study, verdict: Verdict | None) -> None:
        for o in self.observers:
            o.verdict(study, verdict)

    def close(self) -> None:
        for o in self.observers:
            o.close()
