"""A database server URL that cannot be used: one error naming --storage and the reason, exit 2, nothing written."""

from __future__ import annotations

import os
import socket

import pytest
import sqlalchemy
from sqlalchemy.engine import make_url

from flagopt.cli import main

SPACE = """name: s
command: ["{python}", "-m", "flagopt.workloads.sim", "landscape=win10", "seed=2", "steps=15"]
"""


def tree(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, dirs, files in os.walk(root) for f in dirs + files)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tables(url: str) -> list[str]:
    engine = sqlalchemy.create_engine(url)
    try:
        return sorted(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.fixture
def space(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
    return path


def run(space, storage):
    return main(["run", "--space", str(space), "--storage", storage, "--no-preflight", "--quiet"])


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "sqlalche.me" not in err, err
    return err


def test_a_server_that_does_not_answer(space, tmp_path, capsys):
    url = f"mysql+pymysql://flagopt:s3cret@127.0.0.1:{free_port()}/flagopt"
    assert run(space, url) == 2
    err = error_line(capsys)
    assert err.startswith("flagopt: error: --storage: mysql+pymysql://flagopt:***@127.0.0.1:")
    assert "cannot use the database server: Can't connect to MySQL server on '127.0.0.1'" in err and "(MySQL error 2003)" in err
    assert "s3cret" not in err and tree(tmp_path) == ["space.yaml"]


def test_a_wrong_password_and_an_unknown_database(db_server, space, tmp_path, capsys):
    base = make_url(db_server)
    wrong = base.set(password="not-the-password").render_as_string(hide_password=False)
    assert run(space, wrong) == 2
    err = error_line(capsys)
    assert "cannot use the database server: Access denied for user 'flagopt'@" in err and "(MySQL error 1045)" in err
    assert "not-the-password" not in err
    missing = base.set(database=f"{base.database}_nosuchdb").render_as_string(hide_password=False)
    assert run(space, missing) == 2
    assert f"Unknown database '{base.database}_nosuchdb' (MySQL error 1049)" in error_line(capsys)
    assert tree(tmp_path) == ["space.yaml"]


@pytest.mark.parametrize("url,reason", [
    ("mysql+pymysql://flagopt:pw@127.0.0.1:notaport/flagopt", "not a storage URL ("),
    ("nosuchdialect://h/db", "not a storage URL (Can't load plugin: sqlalchemy.dialects:nosuchdialect)"),
    ("mysql+nosuchdriver://h/db", "not a storage URL (Can't load plugin: sqlalchemy.dialects:mysql.nosuchdriver)"),
])
def test_a_malformed_url(space, tmp_path, capsys, url, reason):
    assert run(space, url) == 2
    err = error_line(capsys)
    assert err.startswith("flagopt: error: --storage: ") and reason in err, err
    assert "pw@" not in err and tree(tmp_path) == ["space.yaml"]


def test_a_driver_that_is_not_installed(space, tmp_path, capsys):
    pytest.importorskip("sqlalchemy.dialects.postgresql")
    try:
        import psycopg2  # noqa: F401
        pytest.skip("psycopg2 is installed here")
    except ImportError:
        pass
    assert run(space, "postgresql+psycopg2://flagopt:pw@127.0.0.1:5432/flagopt") == 2
    assert error_line(capsys) == ("flagopt: error: --storage: postgresql+psycopg2://flagopt:***@127.0.0.1:5432/flagopt: "
                                  "the database driver 'psycopg2' is not installed: install psycopg2-binary")
    assert tree(tmp_path) == ["space.yaml"]


@pytest.mark.parametrize("verb", [["leaderboard", "s"], ["status", "s"], ["report", "s", "-o", "out"],
                                  ["export", "s"], ["dashboard", "--port", "0"]], ids=lambda v: v[0])
def test_read_only_verbs_create_nothing_in_an_empty_database(fresh_db, tmp_path, capsys, monkeypatch, verb):
    monkeypatch.chdir(tmp_path)
    assert main([*verb, "--storage", fresh_db]) == 1
    err = error_line(capsys)
    name = make_url(fresh_db).database
    assert err.endswith(f"no study storage in database '{name}' (no Optuna tables; nothing created): check --storage "
                        "or $FLAGOPT_STORAGE"), err
    assert tables(fresh_db) == [] and tree(tmp_path) == []


def test_a_study_that_is_not_there(fresh_db, tmp_path, capsys, space):
    assert main(["run", "--space", str(space), "--storage", fresh_db, "--no-preflight", "--quiet", "--trials", "1"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "other", "--storage", fresh_db]) == 1
    err = error_line(capsys)
    assert err == f"flagopt: error: {fresh_db.replace(make_url(fresh_db).password, '***')}: other: no such study " \
                  "(studies in this storage: s)"
