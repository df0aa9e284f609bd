"""Issue 22: storage URLs and files that used to lose a study or corrupt it (D1, D11, D12, D24)."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from flagopt.cli import main
from flagopt.study import history, load_study
from tests.hardening.conftest import one_line, run


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///", "sqlite:///file:x?mode=memory&uri=true"])
def test_an_in_memory_sqlite_storage_is_refused_before_anything_runs(space, tmp_path, capsys, url):
    # D11: ran a whole study in memory, lost it, exit 0 and a `next:` command that could not work
    before = sorted(os.listdir(tmp_path))
    assert run(space, url) == 2
    err = one_line(capsys)
    assert "an in-memory sqlite database" in err and "lost when flagopt exits" in err
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("url", ["journal:///", "journal:///sub/"])
def test_a_journal_url_naming_a_folder_is_refused(space, tmp_path, capsys, url):
    # D11: IsADirectoryError traceback, and ./<study>/jobs left behind
    (tmp_path / "sub").mkdir()
    before = sorted(os.listdir(tmp_path))
    assert run(space, url) == 2
    assert "names a folder, not a file" in one_line(capsys)
    assert sorted(os.listdir(tmp_path)) == before


def test_a_torn_journal_line_is_cut_before_the_next_append(space, tmp_path, capsys):
    # D1: after a disk-full (or this printf) the next run appended onto the torn line; every verb then died with a
    # JSONDecodeError traceback
    url = "journal:///j.log"
    assert run(space, url, "--trials", "1") == 0
    with open(tmp_path / "j.log", "ab") as f:
        f.write(b'{"op_code":5,"sta')
    assert main(["status", "s0", "--storage", url]) == 0
    assert run(space, url, "--trials", "1") == 0
    for verb in (["status", "s0"], ["leaderboard", "s0"]):
        assert main([*verb, "--storage", url]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert [r.status for r in history(load_study(url, "s0"))] == ["ok", "ok"]
    assert all(json.loads(line) for line in (tmp_path / "j.log").read_bytes().splitlines())


def test_a_journal_damaged_by_an_older_writer_is_read_or_said_in_one_line(space, tmp_path, capsys):
    url = "journal:///j.log"
    assert run(space, url, "--trials", "1") == 0
    log = tmp_path / "j.log"
    lines = log.read_bytes().splitlines(keepends=True)
    # what flagopt before the fix wrote: the torn line, then the next operation appended onto it
    log.write_bytes(b"".join(lines[:-1]) + b'{"op_code":5,"sta' + lines[-1])
    assert [r.status for r in history(load_study(url, "s0"))] == ["ok"]
    with open(log, "ab") as f:
        f.write(b"garbage\n")
    assert main(["leaderboard", "s0", "--storage", url]) == 1
    assert f"the journal file is damaged at line {len(lines) + 1}" in one_line(capsys)


@pytest.mark.parametrize("content", [b"", b"table"])
def test_a_reader_creates_no_tables_in_a_sqlite_file_without_optuna(space, tmp_path, capsys, content):
    # D12: read-only verbs created Optuna's 13 tables in another app's database (or a 0-byte file)
    db = tmp_path / "other.db"
    if content:
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE notes (x)")
        con.commit()
        con.close()
    else:
        db.write_bytes(b"")
    for verb in ("status", "leaderboard", "report", "export"):
        assert main([verb, "s0", "--storage", f"sqlite:///{db}"]) == 1
        assert "no Optuna tables; nothing created" in one_line(capsys)
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == ({"notes"} if content else set())
    if content:  # and run refuses to write a study into another application's database
        assert run(space, f"sqlite:///{db}") == 1
        assert "another application's sqlite database (tables: notes)" in one_line(capsys)
        assert not (tmp_path / "s0").exists()


def test_a_sqlite_url_on_a_journal_file_says_so(space, tmp_path, capsys):
    # D24: said "damaged ... salvage with .recover"
    assert run(space, "journal:///j.log", "--trials", "1") == 0
    capsys.readouterr()
    assert main(["status", "s0", "--storage", "sqlite:///j.log"]) == 1
    err = one_line(capsys)
    assert "j.log is a journal file, not a sqlite database: use --storage journal:///j.log" in err
    assert "damaged" not in err
