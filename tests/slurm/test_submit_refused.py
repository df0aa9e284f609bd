"""A job sbatch refuses (an unknown partition) is recorded as not run: no RUNNING trial, no phantom job in ``status``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest

from flagopt.cli import main
from flagopt.report import study_data, study_status
from flagopt.study import history, load_study

pytestmark = pytest.mark.slurm
FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.01"]'


def test_a_refused_sbatch_leaves_no_running_trial(slurm_cluster: set[str], tmp_path: Path, capsys) -> None:
    storage = f"sqlite:///{tmp_path}/flagopt.db"
    space = tmp_path / "space.yaml"
    space.write_text(textwrap.dedent(f"""
        name: refused
        command: {FAULTY}
        executor: {{kind: slurm, slurm: {{nodelist: node1}}}}
        stop: {{max_trials: 2}}
    """))
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet",
                 "--partition", "no-such-partition"]) != 0
    assert "sbatch" in capsys.readouterr().err
    trials = load_study(storage, "refused").get_trials()
    assert trials and all(t.state != optuna.trial.TrialState.RUNNING for t in trials)
    (record,) = history(load_study(storage, "refused"))
    assert record.status == "invalid" and "could not be submitted" in record.attrs["failure_reason"]
    assert study_status(study_data(storage, "refused")).running == ()  # no phantom job in `status`
