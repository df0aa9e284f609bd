"""The driver reports a run through its observer: launched, told, the verdict, then close; the CLI wires the live view."""

from __future__ import annotations

import optuna
import pytest

from flagopt.cli import main
from flagopt.executors import LocalExecutor
from flagopt.space import load_space
from flagopt.study import StudyObserver, StudyRunner, history, load_study, study_folder

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.005"]'
SPACE = f"""
    name: observed
    command: {FAULTY}
    profiles:
      a: {{env: {{FOO: "1"}}}}
    stop: {{max_trials: 3}}
"""


class Recorder(StudyObserver):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def launched(self, number, plan, job_id):
        self.events.append(("launched", number, plan.kind))

    def told(self, study, number, plan, collected):
        self.events.append(("told", number, collected.status, len(study.trials)))

    def verdict(self, study, verdict):
        self.events.append(("verdict", verdict.reason if verdict else None))

    def close(self):
        self.events.append(("close",))


def test_the_driver_reports_each_trial_then_the_verdict(write_space, storage):
    space = load_space(write_space(SPACE))
    recorder = Recorder()
    runner = StudyRunner(space, LocalExecutor(study_folder(storage, space.name) / "jobs", timeout_min=2),
                         storage=storage, progress=recorder, poll_s=0.05)
    verdict = runner.run()
    records = history(load_study(storage, "observed"))
    assert [e for e in recorder.events if e[0] == "launched"] == [("launched", r.number, r.kind) for r in records]
    told = [e for e in recorder.events if e[0] == "told"]
    assert [(n, status) for _, n, status, _ in told] == [(r.number, r.status) for r in records]
    for name, number, *_ in told:  # each trial is told after it was launched
        assert recorder.events.index(("launched", number, records[number].kind)) < recorder.events.index(
            next(e for e in told if e[1] == number))
    assert recorder.events[-2:] == [("verdict", verdict.reason if verdict else None), ("close",)]


def test_run_keeps_the_dashboard_live_view_current(write_space, storage):
    optuna_dashboard = pytest.importorskip("optuna_dashboard")
    from flagopt.dashboard import NOTE_TITLE

    assert main(["run", "--space", str(write_space(SPACE)), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    note = optuna_dashboard.get_note(optuna.load_study(study_name="observed", storage=storage))
    assert note.startswith(NOTE_TITLE) and "**Verdict (" in note


def test_the_console_observer_shows_the_step_of_the_trial_in_flight(tmp_path):
    import io

    from rich.console import Console

    from flagopt.space import TrialConfig
    from flagopt.study import Plan, Progress

    progress = Progress(Console(file=io.StringIO(), force_terminal=True))
    progress.launched(4, Plan(TrialConfig("profile", "a"), "profile", "profile a"), "job-1")
    (tmp_path / "rank0.log").write_text("completed step: 6, seconds: 0.1\ncompleted step: 7, seconds: 0.1\n")
    progress.waiting(4, str(tmp_path), 20, "a +1.0%")
    try:
        assert str(progress._status.status).startswith("trial 4 · step 7/20 · ")
        assert str(progress._status.status).endswith("· best a +1.0%")
    finally:
        progress.close()
