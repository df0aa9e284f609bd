"""Issue 22: the lock and the trial folders are tied to the study in its storage (D2, D9, D3, D8)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna

from flagopt.study import history, load_study
from tests.hardening.conftest import one_line, run

ROOT = Path(__file__).resolve().parents[2]


def slow(space: Path) -> Path:
    space.write_text(space.read_text().replace("step_s=0.003", "step_s=0.4").replace("max_trials: 4", "max_trials: 2"))
    return space


def start_driver(space: Path, storage: str, tmp_path: Path, **env: str) -> subprocess.Popen:
    out = open(tmp_path / "driver.out", "wb")  # noqa: SIM115 (closed with the process)
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                               "--no-preflight", "--quiet"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    out.close()
    return driver


def wait_running(storage, driver: subprocess.Popen) -> None:
    deadline = time.time() + 60
    while time.time() < deadline and driver.poll() is None:
        try:
            study = optuna.load_study(study_name="s0", storage=storage)
            if any(t.state == optuna.trial.TrialState.RUNNING for t in study.trials):
                return
        except Exception:  # noqa: BLE001 (the storage is still being created)
            pass
        time.sleep(0.2)
    raise AssertionError("the first driver never ran a trial")


def test_a_second_driver_with_other_artifacts_or_a_deleted_lock_file_is_refused(space, tmp_path, capsys, monkeypatch):
    # D2: the lock lived under $FLAGOPT_ARTIFACTS, so a driver with another one ran too and cancelled the first's
    # trial; D9: deleting studies/<s>/driver.lock under a live driver had the same effect
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    first = start_driver(slow(space), storage, tmp_path)
    try:
        wait_running(storage, first)
        (tmp_path / "studies" / "s0" / "driver.lock").unlink(missing_ok=True)
        assert run(space, storage) == 1
        assert "another driver runs this study" in one_line(capsys)
        monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "elsewhere"))
        assert run(space, storage) == 1
        assert "another driver runs this study" in one_line(capsys)
        assert first.wait(timeout=120) == 0, (tmp_path / "driver.out").read_text()  # undisturbed
    finally:
        if first.poll() is None:
            first.kill()
    assert [r.status for r in history(load_study(storage, "s0"))] == ["ok", "ok"]


def test_a_journal_lock_is_kept_beside_the_journal_not_in_the_artifacts(space, tmp_path, capsys, monkeypatch):
    storage = "journal:///j.log"
    first = start_driver(slow(space), storage, tmp_path)
    try:
        wait_running(optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "j.log"))),
                     first)
        monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "elsewhere"))
        assert run(space, storage) == 1
        assert "another driver runs this study" in one_line(capsys)
        # D9 for a journal: the lock file deleted under the live driver is locked again by it within a second
        for lock in (tmp_path / "j.log.locks" / "s0.lock", tmp_path / "s0" / "driver.lock"):
            lock.unlink(missing_ok=True)
        time.sleep(2.5)
        monkeypatch.delenv("FLAGOPT_ARTIFACTS")
        assert run(space, storage) == 1
        assert "another driver runs this study" in one_line(capsys)
        assert first.wait(timeout=120) == 0, (tmp_path / "driver.out").read_text()
    finally:
        if first.poll() is None:
            first.kill()
    assert (tmp_path / "j.log.locks" / "s0.lock").exists()


def test_two_storages_with_a_study_of_one_name_never_share_trial_folders(space, tmp_path, capsys, monkeypatch):
    # D3: two databases, one $FLAGOPT_ARTIFACTS (as docs/storage.md recommends): both wrote trials/N/, one study
    # scored the other's truncated logs
    monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "shared"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run(space, f"sqlite:///{tmp_path}/a/flagopt.db", "--trials", "1") == 0
    log = tmp_path / "shared" / "s0" / "trials" / "0" / "rank0.log"
    before = log.read_bytes()
    assert run(space, f"sqlite:///{tmp_path}/b/flagopt.db", "--trials", "1") == 1
    err = one_line(capsys)
    assert "this folder holds the trial folders of another study named 's0'" in err and "a/flagopt.db" in err
    assert log.read_bytes() == before
    assert not load_study(f"sqlite:///{tmp_path}/b/flagopt.db", "s0").trials if _has_study(tmp_path / "b") else True
    # the first study resumes in its folder as before
    assert run(space, f"sqlite:///{tmp_path}/a/flagopt.db", "--trials", "1") == 0


def _has_study(folder: Path) -> bool:
    try:
        load_study(f"sqlite:///{folder}/flagopt.db", "s0")
    except Exception:
        return False
    return True


def test_run_never_adopts_an_optuna_study_flagopt_did_not_make(space, tmp_path, capsys):
    # D8: run adopted a foreign study of the same name (direction minimize), added runs, flipped its RUNNING trial
    (tmp_path / "studies").mkdir()
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    foreign = optuna.create_study(study_name="s0", storage=storage, direction="minimize")
    foreign.ask()
    assert run(space, storage) == 1
    err = one_line(capsys)
    assert "a study of this name that flagopt did not make is in this storage (direction minimize, 1 trials" in err
    trials = optuna.load_study(study_name="s0", storage=storage).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.RUNNING]
