"""A command that cannot even start (a missing interpreter path) is a crash that names the missing file."""

from __future__ import annotations

from pathlib import Path

from flagopt.executors import TrialLaunch, run_trial
from flagopt.failures import CRASH, classify


def test_a_command_that_cannot_start_is_a_crash_naming_the_missing_file(tmp_path):
    launch = TrialLaunch(argv=(".venv-none/bin/python", "-m", "train"), env={}, workdir=str(tmp_path),
                         trial_dir=str(tmp_path / "trial"))
    outcome = run_trial(launch)
    assert outcome.exit_code == 127 and outcome.first_step_at is None
    failure = classify(Path(outcome.log_path).read_text(), exit_code=outcome.exit_code)
    assert failure is not None and failure.failure_class == CRASH
    assert "No such file or directory: '.venv-none/bin/python'" in failure.reason
    assert str(tmp_path) in failure.reason  # where it was looked for
