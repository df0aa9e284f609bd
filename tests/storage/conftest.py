"""A real MariaDB server for the database-storage tests (scripts/db_server_start.sh).

The ``db_server`` fixture uses the server named by ``$FLAGOPT_TEST_DB_URL``, else the one whose URL
scripts/db_server_start.sh wrote to ``$FLAGOPT_DB_DIR/env.sh`` (default /tmp/flagopt-db). Otherwise, with
``FLAGOPT_START_DB=1``, it starts one with that script and stops it at the end; else the tests are skipped.
Every test gets a database of its own (``fresh_db``), dropped afterwards, so tests never see each other's studies.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
START = "run `bash scripts/db_server_start.sh` and `source /tmp/flagopt-db/env.sh`, or set FLAGOPT_START_DB=1"


def _env_file() -> Path:
    return Path(os.environ.get("FLAGOPT_DB_DIR", "/tmp/flagopt-db")) / "env.sh"


def _url_from_env_file() -> str | None:
    try:
        match = re.search(r"FLAGOPT_TEST_DB_URL='([^']+)'", _env_file().read_text())
    except OSError:
        return None
    return match.group(1) if match else None


def _answers(url: str) -> str | None:
    """``None`` when the server of ``url`` answers, else why not."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("pymysql", reason="PyMySQL is not installed: pip install -e '.[db]'")
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as db:
            db.execute(sqlalchemy.text("SELECT 1"))
    except sqlalchemy.exc.DBAPIError as exc:
        return " ".join(str(exc.orig).split())
    finally:
        engine.dispose()
    return None


@pytest.fixture(scope="session")
def db_server() -> Iterator[str]:
    """The base URL of a running server (its database is the prefix of every test's own database)."""
    url = os.environ.get("FLAGOPT_TEST_DB_URL") or _url_from_env_file()
    why = _answers(url) if url else "no FLAGOPT_TEST_DB_URL and no /tmp/flagopt-db/env.sh"
    started = False
    if why is not None:
        if os.environ.get("FLAGOPT_START_DB") != "1":
            pytest.skip(f"no database server for the storage tests ({why}): {START}")
        proc = subprocess.run(["bash", str(REPO / "scripts" / "db_server_start.sh")], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"scripts/db_server_start.sh failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        url, started = _url_from_env_file(), True
        assert url and _answers(url) is None, f"the started server does not answer at {url}"
    yield url
    if started:
        subprocess.run(["bash", str(REPO / "scripts" / "db_server_stop.sh")], capture_output=True, timeout=120)


@pytest.fixture
def fresh_db(db_server: str) -> Iterator[str]:
    """The URL of a new, empty database on the server (``<base>_t<hex>``), dropped after the test."""
    import sqlalchemy
    from sqlalchemy.engine import make_url

    base = make_url(db_server)
    name = f"{base.database}_t{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(base)
    with admin.begin() as db:
        db.execute(sqlalchemy.text(f"CREATE DATABASE `{name}`"))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.begin() as db:
            db.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()
