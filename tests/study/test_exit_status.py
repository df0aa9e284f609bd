"""``run``'s exit status says whether anything was measured."""

from __future__ import annotations

from flagopt.cli import main
from flagopt.study import history, load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"{extra}]'


def run(space, storage, *extra):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet", *extra])


def test_a_study_that_measured_nothing_exits_non_zero(write_space, storage, capsys):
    # cron and CI read the status: `baseline-failed` exited 0, a success to them.
    space = write_space(f"""
        name: never-measured
        command: {FAULTY.replace("{extra}", ', "scenario=crash"')}
        stop: {{max_trials: 2}}
    """)
    assert run(space, storage) == 1
    err = capsys.readouterr().err
    assert "flagopt: error: nothing could be measured: baseline-deployed never ran ok (baseline-failed:" in err
    assert load_study(storage, "never-measured").user_attrs["flagopt.verdict"]["reason"] == "baseline-failed"


def test_a_study_that_measured_exits_zero(write_space, storage):
    space = write_space(f"name: measured\ncommand: {FAULTY.replace('{extra}', '')}\nstop: {{max_trials: 2}}\n")
    assert run(space, storage) == 0
