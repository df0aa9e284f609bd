"""Bad storage paths: one error naming the path, nothing created; read-only verbs never create a storage."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess

import pytest

from flagopt.cli import main
from flagopt.study import load_study

FAULTY = '["{python}", "-m", "flagopt.workloads.faulty", "steps=15", "step_s=0.003"]'
READ_ONLY_VERBS = [["leaderboard", "s"], ["status", "s"], ["report", "s", "-o", "{tmp}/out"], ["export", "s"]]


def tree(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, dirs, files in os.walk(root) for f in dirs + files)


@pytest.mark.parametrize("verb", READ_ONLY_VERBS, ids=lambda v: v[0])
def test_read_only_verbs_do_not_create_a_storage(tmp_path, capsys, verb):
    storage = f"sqlite:///{tmp_path}/typo/flagopt.db"
    argv = [a.format(tmp=tmp_path) for a in verb]
    assert main([*argv, "--storage", storage]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"flagopt: error: {storage}: s: no such study: no study storage at {tmp_path}/typo/flagopt.db (nothing created): " \
                  "point at the storage `run` wrote: --storage sqlite:////path/to/studies/flagopt.db (an absolute path " \
                  "has four slashes after sqlite:), or export FLAGOPT_STORAGE=<that URL>"
    assert tree(tmp_path) == []


def test_default_storage_missing_says_where_it_looked_and_how_to_point_at_it(tmp_path, capsys, monkeypatch):
    """The default storage is relative to the working folder: from another folder every verb used to say only
    "no study storage"; it says the absolute path it tried, why, and the two ways to point at the real one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLAGOPT_STORAGE", raising=False)
    assert main(["status", "demo"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"no study storage at {tmp_path.resolve()}/studies/flagopt.db (nothing created)" in err
    assert f"the default storage is a path relative to the folder flagopt runs in ({tmp_path.resolve()})" in err
    assert "--storage sqlite:////path/to/studies/flagopt.db" in err and "export FLAGOPT_STORAGE=" in err
    assert tree(tmp_path) == []


def test_journal_storage_that_does_not_exist_is_not_created(tmp_path, capsys):
    assert main(["leaderboard", "s", "--storage", f"journal:///{tmp_path}/j/study.log"]) == 1
    assert "no study storage at" in capsys.readouterr().err and tree(tmp_path) == []


def test_storage_under_a_file_is_one_error_and_nothing_written(write_space, tmp_path, capsys):
    space = write_space(f"name: s\ncommand: {FAULTY}\n")
    (tmp_path / "afile").write_text("not a folder")
    before = tree(tmp_path)
    assert main(["run", "--space", str(space), "--storage", f"sqlite:///{tmp_path}/afile/db/flagopt.db",
                 "--no-preflight", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"flagopt: error: --storage: {tmp_path}/afile/db: cannot create the storage folder: ")
    assert "Traceback" not in err and tree(tmp_path) == before


def test_study_folder_that_is_a_file_is_refused_before_the_study_is_created(write_space, storage, tmp_path, capsys):
    space = write_space(f"name: s\ncommand: {FAULTY}\n")
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "s").write_text("a file where the study folder goes")
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 2
    assert "cannot create the study folder" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "studies")) == ["s"]  # no database either


@pytest.fixture
def read_only_folder(tmp_path):
    """A real read-only mount (tmpfs, ro) where the test may mount; else a folder without write permission."""
    folder = tmp_path / "ro"
    folder.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True) \
        if shutil.which("mount") and os.geteuid() == 0 else None
    if mount is None or mount.returncode != 0:
        if os.geteuid() == 0:
            pytest.skip("root writes through permission bits and cannot mount here")
        folder.chmod(0o555)
    try:
        yield folder
    finally:
        if mount is not None and mount.returncode == 0:
            subprocess.run(["umount", str(folder)], check=True)


def test_read_only_storage_folder_is_one_error(write_space, read_only_folder, capsys):
    space = write_space(f"name: s\ncommand: {FAULTY}\n")
    assert main(["run", "--space", str(space), "--storage", f"sqlite:///{read_only_folder}/flagopt.db",
                 "--no-preflight", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"flagopt: error: --storage: {read_only_folder}: the storage folder is not writable " \
                  "(read-only mount or permissions)"
    assert os.listdir(read_only_folder) == []


def test_a_corrupt_page_of_the_sqlite_file_is_said_plainly(write_space, storage, tmp_path, capsys):
    space = write_space(f"name: s\ncommand: {FAULTY}\nstop: {{max_trials: 2}}\n")
    assert main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"]) == 0
    db = tmp_path / "studies" / "flagopt.db"
    with sqlite3.connect(db) as con:
        root, = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'trial_user_attributes'").fetchone()
        page_size, = con.execute("PRAGMA page_size").fetchone()
    con.close()
    with open(db, "r+b") as f:  # one damaged b-tree page, as a failing disk or a torn copy leaves it
        f.seek((root - 1) * page_size + 8)
        f.write(b"\xff" * 64)
    for argv in (["leaderboard", "s"], ["run", "--space", str(space), "--no-preflight", "--quiet"]):
        assert main([*argv, "--storage", storage]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"flagopt: error: {storage}: ") and f"the sqlite file {db} is damaged (" in err
        assert err.endswith(f"restore it from a backup, or salvage it: sqlite3 {db} .recover | sqlite3 recovered.db")
        assert "\n" not in err and "max length" not in err
    with pytest.raises(Exception, match="damaged"):
        load_study(storage, "s")
