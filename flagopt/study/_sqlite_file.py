"""What a sqlite storage file is, before Optuna opens it: a sqlite database at all, flagopt's and not another
application's, and undamaged; each answer one plain error instead of Optuna's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flagopt.errors import StudyError


class MissingStorage(StudyError):
    """A read-only verb was pointed at a sqlite or journal file that does not exist (or a database without a study)."""


#: the first bytes of every sqlite database file
SQLITE_HEADER = b"SQLite format 3\x00"


def check_sqlite_file(path: Path, url: str, *, create: bool = True) -> None:
    """A damaged sqlite file is said plainly (Optuna would report "exceeding max length" or worse); so is a file that
    is no sqlite database (a journal file given as ``sqlite:///``), and, for a reader (``create=False``), a database
    without Optuna's tables (another application's, or an empty file): nothing is created in it."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        head = SQLITE_HEADER  # unreadable: Optuna says why
    if head and head != SQLITE_HEADER:
        if head.startswith(b"{"):
            raise StudyError(url, None, f"{path} is a journal file, not a sqlite database: use --storage "
                                        f"journal:///{path}")
        raise StudyError(url, None, f"{path} is not a sqlite database (it does not start with sqlite's header): "
                                    "check --storage or $FLAGOPT_STORAGE")
    tables = _sqlite_tables(path)
    if tables is not None and not create and "alembic_version" not in tables:
        raise MissingStorage(url, None, f"no study storage in {path} (no Optuna tables; nothing created): check "
                                        "--storage or $FLAGOPT_STORAGE")
    if tables and create and not tables & {"alembic_version", "studies", "flagopt_driver_locks"}:
        raise StudyError(url, None, f"{path} is another application's sqlite database (tables: "
                                    f"{', '.join(sorted(tables)[:5])}): give flagopt a file of its own")
    _quick_check(path, url)


def _sqlite_tables(path: Path) -> set[str] | None:
    """The table names of a sqlite file (``None`` when it cannot be opened: Optuna or quick_check says why)."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return None
    finally:
        con.close()


def _quick_check(path: Path, url: str) -> None:
    con = None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        lines = [line for row in rows for line in str(row).splitlines() if line and not line.startswith("***")]
        problem = None if rows == ["ok"] else "; ".join(lines[:2]) + ("; ..." if len(lines) > 2 else "")
    except sqlite3.OperationalError as exc:
        problem = None if "unable to open" in str(exc) or "locked" in str(exc) else str(exc)  # Optuna says why
    except sqlite3.DatabaseError as exc:
        problem = str(exc)
    finally:
        if con is not None:
            con.close()
    if problem:
        raise StudyError(url, None, f"the sqlite file {path} is damaged ({problem}); restore it from a backup, "
                                    f"or salvage it: sqlite3 {path} .recover | sqlite3 recovered.db")
