"""Where studies live: the Optuna storage URL and the per-trial artifact folders."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import optuna

from flagopt.errors import FlagoptError, StudyError

DEFAULT_STORAGE = "sqlite:///studies/flagopt.db"
JOURNAL_PREFIX = "journal:///"
SQLITE_PREFIX = "sqlite:///"


class MissingStorage(StudyError):
    """A read-only verb was pointed at a sqlite or journal file that does not exist."""


def storage_file(url: str) -> Path | None:
    """The file behind a sqlite or journal URL (``None`` for a database server)."""
    if url.startswith(JOURNAL_PREFIX):
        return Path(url[len(JOURNAL_PREFIX) - 1:] if url.startswith("journal:////") else url[len(JOURNAL_PREFIX):])
    if url.startswith(SQLITE_PREFIX) and url != SQLITE_PREFIX and ":memory:" not in url:
        return Path(url[len(SQLITE_PREFIX):].split("?", 1)[0]).expanduser()
    return None


def writable_folder(folder: Path, what: str, source: str) -> None:
    """Create ``folder`` (and its parents) and check it can be written, or raise one :class:`FlagoptError`.

    Exit 2: a read-only mount or a parent that is a file is a bad path, and nothing has been written yet.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FlagoptError(source, str(folder), f"cannot create the {what} folder: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FlagoptError(source, str(folder), f"the {what} folder is not writable (read-only mount or permissions)")


def prepare_storage(url: str | None, study_name: str) -> None:
    """Before ``run`` writes anything: the storage's folder and the study's folder exist and are writable."""
    path = storage_file(storage_url(url))
    if path is not None:
        writable_folder(path.parent, "storage", "--storage")
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise FlagoptError("--storage", str(path), "the storage file is not writable")
    writable_folder(study_folder(url, study_name), "study", "--storage")


def check_sqlite_file(path: Path, url: str) -> None:
    """A damaged sqlite file is said plainly (Optuna would report "exceeding max length" or worse)."""
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


def open_storage(url: str | None, *, create: bool = True) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: any RDB URL, or ``journal:///path.log`` (a journal file, for NFS clusters).

    With ``create=False`` (the read-only verbs) a sqlite or journal file that does not exist is an error: nothing
    is created on the way to saying "no such study".
    """
    url = storage_url(url)
    path = storage_file(url)
    if path is not None:
        if not create and not path.exists():
            raise MissingStorage(url, None, f"no study storage at {path} (nothing created): check --storage or "
                                            "$FLAGOPT_STORAGE")
        if create:
            writable_folder(path.parent, "storage", "--storage")
        if url.startswith(SQLITE_PREFIX) and path.exists():
            check_sqlite_file(path, url)
    if url.startswith(JOURNAL_PREFIX):
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else None
    attempt = 0
    while True:
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except Exception as exc:  # sqlalchemy's errors are many; the user needs the URL and the cause
            # Two processes creating the same new storage at once (`run` starting while `status` opens it) race
            # on the schema's version row; the loser finds the schema there a moment later.
            attempt += 1
            if "alembic_version" not in str(exc) or attempt >= 3:
                raise StudyError("--storage", url, f"cannot open the study storage: {exc}") from None
            time.sleep(0.5)


def storage_url(url: str | None) -> str:
    return url or os.environ.get("FLAGOPT_STORAGE") or DEFAULT_STORAGE


def artifacts_root(url: str | None) -> Path:
    """Trial folders sit beside a sqlite/journal file, else under ./studies."""
    url = storage_url(url)
    for prefix in ("sqlite:///", JOURNAL_PREFIX):
        if url.startswith(prefix):
            return Path(url[len(prefix):]).expanduser().resolve().parent
    return Path("studies").resolve()


def study_folder(url: str | None, study_name: str) -> Path:
    return artifacts_root(url) / study_name


def load_study(url: str | None, study_name: str) -> optuna.Study:
    try:
        storage = open_storage(url, create=False)
    except StudyError as exc:  # name the study asked for, too
        reason = f"no such study: {exc.reason}" if isinstance(exc, MissingStorage) else exc.reason
        raise StudyError(exc.source, study_name, reason) from None
    names = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
    if study_name not in names:
        known = ", ".join(sorted(names)) or "none"
        raise StudyError(storage_url(url), study_name, f"no such study (studies in this storage: {known})")
    return optuna.load_study(study_name=study_name, storage=storage)
