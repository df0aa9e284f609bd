"""A job whose runner never reported is the executor's or the machine's fault: ``launch-failure``, retried, never a
crash of the configuration; and the local executor no longer loses its controller's race for the log folder."""

from __future__ import annotations

import sys
import time

import submitit.local.local

from flagopt.executors import LocalExecutor, TrialLaunch
from flagopt.failures import HANDLING, LAUNCH_FAILURE, NODE_FAILURE, TIME_LIMIT, classify
from flagopt.study import collect


def test_a_job_without_a_report_is_a_launch_failure_naming_what_the_executor_said():
    said = "submitit.core.utils.UncompletedJobError: Job 41 (task: 0) with path ...\nFileNotFoundError: [Errno 2] " \
           "No such file or directory: '/s/jobs/41/41_0_log.out'\n"
    failure = classify("", exit_code=None, scheduler_state="FAILED", reported=False, launch_error=said)
    assert failure is not None and failure.failure_class == LAUNCH_FAILURE
    assert "not the configuration" in failure.reason and "41_0_log.out" in failure.reason
    handling = HANDLING[LAUNCH_FAILURE]
    assert handling.status == "flake" and handling.retries >= 1 and not handling.stop_study
    # the runner's report is what tells a crash from a lost job: the same state with one is the command's crash
    assert classify("Segmentation fault", exit_code=139, scheduler_state="FAILED").failure_class == "crash"


def test_the_scheduler_still_names_its_own_causes_for_a_job_without_a_report():
    assert classify("", exit_code=None, scheduler_state="NODE_FAIL", reported=False).failure_class == NODE_FAILURE
    assert classify("", exit_code=None, scheduler_state="TIMEOUT", reported=False).failure_class == TIME_LIMIT


def _launch(tmp_path, name):
    code = "import time\nfor i in range(3):\n    print(f'completed step: {i}, seconds: 0.01, tokens/s: 100', flush=True)"
    return TrialLaunch(argv=(sys.executable, "-c", code), env={}, workdir=str(tmp_path),
                       trial_dir=str(tmp_path / "trials" / name))


def test_a_local_job_runs_when_its_controller_starts_before_the_driver_writes_anything(tmp_path, monkeypatch):
    # The race of a loaded machine, made certain: the driver process is slow to return from starting the
    # controller, so the controller opens its log before the driver has created anything for the job. With
    # submitit's folder per job (jobs/<pid>/, created by the driver after the start) the controller died with
    # FileNotFoundError and the trial never ran.
    start = submitit.local.local.start_controller

    def slow_driver(*args, **kwargs):
        process = start(*args, **kwargs)
        time.sleep(3.0)
        return process

    monkeypatch.setattr(submitit.local.local, "start_controller", slow_driver)
    executor = LocalExecutor(tmp_path / "jobs", timeout_min=2)
    job = executor.submit(_launch(tmp_path, "0"))
    result = job.result(timeout_s=120)
    assert result.rank0 is not None, result.error
    assert result.rank0.exit_code == 0
    assert "completed step: 2" in (tmp_path / "trials" / "0" / "rank0.log").read_text()


def test_a_resumed_driver_finds_a_local_job_in_either_folder_layout(tmp_path):
    executor = LocalExecutor(tmp_path / "jobs", timeout_min=2)
    job = executor.submit(_launch(tmp_path, "0"))
    assert job.result(timeout_s=120).rank0 is not None
    found = executor.attach(job.job_id, _launch(tmp_path, "0"))
    assert found is not None and found.result(timeout_s=10).rank0.exit_code == 0
    assert executor.attach("999999999", _launch(tmp_path, "0")) is None
    # a study started before the flat folder keeps its jobs in jobs/<pid>/
    old = tmp_path / "jobs" / "4242"
    old.mkdir()
    for path in (tmp_path / "jobs").glob(f"{job.job_id}_*"):
        path.rename(old / path.name.replace(job.job_id, "4242", 1))
    again = executor.attach("4242", _launch(tmp_path, "0"))
    assert again is not None and again.status().done


def test_collect_classes_a_job_without_an_outcome_as_launch_failure(tmp_path):
    from flagopt.executors import JobResult
    from flagopt.space import load_space

    space_file = tmp_path / "s.yaml"
    space_file.write_text('name: s\ncommand: ["python3", "-c", "pass"]\n')
    got = collect(load_space(space_file), JobResult("41", "FAILED", (), error="FileNotFoundError: jobs/41/41_0_log.out"),
                  baselines=(), reference_loss=None)
    assert got.status == "flake" and got.attrs["failure_class"] == LAUNCH_FAILURE
