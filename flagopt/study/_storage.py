"""Where studies live: the Optuna storage URL and the per-trial artifact folders.

Three kinds of storage URL: a sqlite file (the default), a journal file (``journal:///path.log``, for NFS), and a
database server (``mysql+pymysql://user@host:3306/db``, ``postgresql://...``) that a team shares. A server URL has no
file to put the trial folders beside: they go under ``$FLAGOPT_ARTIFACTS`` (any storage), else ``./studies``.

Example:
    >>> shown_url("mysql+pymysql://flagopt:secret@db.example:3306/flagopt")
    'mysql+pymysql://flagopt:***@db.example:3306/flagopt'
    >>> is_server_url("sqlite:///studies/flagopt.db"), is_server_url("mysql+pymysql://u@h/db")
    (False, True)
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import optuna
import sqlalchemy
from sqlalchemy.engine import make_url

from flagopt.errors import FlagoptError, StudyError
from flagopt.study._faults import retrying
from flagopt.study._journal import JournalFile
from flagopt.study._sqlite_file import MissingStorage, check_sqlite_file

DEFAULT_STORAGE = "sqlite:///studies/flagopt.db"
JOURNAL_PREFIX = "journal:///"
SQLITE_PREFIX = "sqlite:///"
#: the folder trial folders go under, whatever the storage (a shared NFS folder for a team on a database server)
ARTIFACTS_ENV = "FLAGOPT_ARTIFACTS"
#: the Python package a server URL's driver comes from, for the "not installed" error
DRIVER_PACKAGES = {"pymysql": "PyMySQL (pip install 'flagopt[db]')", "mysqldb": "mysqlclient",
                   "psycopg2": "psycopg2-binary", "psycopg": "psycopg", "mysqlconnector": "mysql-connector-python"}
#: ``scheme://user:password@``: what :func:`shown_url` hides
_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)[^@]*@")


class UnreachableStorage(FlagoptError):
    """A database server URL that is malformed, names a driver that is not installed, or cannot be reached (exit 2)."""


def is_server_url(url: str) -> bool:
    """Whether ``url`` names a database server (anything but a sqlite or journal URL)."""
    return not url.startswith(("sqlite:", "journal:"))


def shown_url(url: str) -> str:
    """``url`` as it may be printed, logged or written into a report: its password replaced by ``***`` (a URL
    SQLAlchemy cannot parse too: the error that says so prints it)."""
    return _PASSWORD.sub(r"\1***@", url, count=1)


def db_reason(exc: BaseException) -> str:
    """The driver's own words for a failed connection, without SQLAlchemy's statement and background link."""
    orig = getattr(exc, "orig", None) or exc
    args = getattr(orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int):  # MySQL drivers: (errno, message)
        return f"{args[1]} (MySQL error {args[0]})"
    return " ".join(str(orig).split()) or type(orig).__name__


def server_engine(url: str, **kwargs) -> sqlalchemy.engine.Engine:
    """A SQLAlchemy engine on a server URL (not yet connected), or one :class:`UnreachableStorage` saying why not."""
    try:
        return sqlalchemy.create_engine(url, pool_pre_ping=True, **kwargs)
    except ModuleNotFoundError as exc:
        package = DRIVER_PACKAGES.get(exc.name or "", exc.name)
        raise UnreachableStorage("--storage", shown_url(url),
                                 f"the database driver {exc.name!r} is not installed: install {package}") from None
    except (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError, ValueError) as exc:
        raise UnreachableStorage("--storage", shown_url(url), f"not a storage URL ({db_reason(exc)}); expected "
                                 "sqlite:///path.db, journal:///path.log or e.g. "
                                 "mysql+pymysql://user:password@host:3306/database") from None


def check_server(url: str, *, create: bool) -> None:
    """The server of ``url`` answers, the credentials and the database are right; without ``create``, the database
    already holds Optuna's tables (a read-only verb creates nothing on the way to saying "no such study")."""
    engine = server_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT 1"))
            # Optuna stamps alembic_version last: without its row the schema is absent or still being created
            # (by a driver starting on a fresh database), and a reader must not create or stamp it too.
            complete = sqlalchemy.inspect(connection).has_table("alembic_version") and connection.execute(
                sqlalchemy.text("SELECT COUNT(*) FROM alembic_version")).scalar()
    except sqlalchemy.exc.DBAPIError as exc:
        raise UnreachableStorage("--storage", shown_url(url), f"cannot use the database server: {db_reason(exc)}") from None
    finally:
        engine.dispose()
    if not create and not complete:
        database = make_url(url).database
        raise MissingStorage(shown_url(url), None, f"no study storage in database {database!r} (no Optuna tables; "
                                                   "nothing created): check --storage or $FLAGOPT_STORAGE")


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
    """Before ``run`` writes anything: the storage's folder (or server) and the study's folder are usable."""
    check_url(storage_url(url))
    if is_server_url(storage_url(url)):
        check_server(storage_url(url), create=True)
    path = storage_file(storage_url(url))
    if path is not None:
        writable_folder(path.parent, "storage", "--storage")
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise FlagoptError("--storage", str(path), "the storage file is not writable")
        if path.exists() and storage_url(url).startswith(SQLITE_PREFIX):
            check_sqlite_file(path, storage_url(url))  # another application's database: refused before the folder
    writable_folder(study_folder(url, study_name), "study", "--storage")


def check_url(url: str) -> None:
    """A URL that cannot hold a study past this process, or names a folder, is one error before anything is made:
    an in-memory sqlite database (``sqlite://``, ``sqlite:///``, ``:memory:``) would run a whole study and lose it."""
    if url.startswith("sqlite:") and storage_file(url) is None:
        raise FlagoptError("--storage", url, "an in-memory sqlite database is lost when flagopt exits: give a file, "
                                             f"e.g. {DEFAULT_STORAGE}")
    if url.startswith("sqlite:") and "mode=memory" in url:
        raise FlagoptError("--storage", url, "an in-memory sqlite database (mode=memory) is lost when flagopt exits: "
                                             f"give a file, e.g. {DEFAULT_STORAGE}")
    path = storage_file(url)
    if path is not None and (str(path) in ("", ".", "/") or url.endswith("/") or path.is_dir()):
        raise FlagoptError("--storage", url, f"names a folder, not a file: give the file's path, e.g. "
                                             f"{'journal:///' if url.startswith('journal') else 'sqlite:///'}"
                                             f"{(path if str(path) not in ('', '.') else Path('studies')) / 'flagopt'}"
                                             f"{'.log' if url.startswith('journal') else '.db'}")


def missing_file_reason(url: str, path: Path) -> str:
    """Where a read-only verb looked for a storage file that is not there, and how to point it elsewhere."""
    where = path.expanduser().resolve()
    scheme = JOURNAL_PREFIX if url.startswith(JOURNAL_PREFIX) else SQLITE_PREFIX
    how = (f"point at the storage `run` wrote: --storage {scheme}/path/to/studies/{where.name} (an absolute path "
           f"has four slashes after {scheme[:-3]}), or export FLAGOPT_STORAGE=<that URL>")
    if not path.is_absolute():
        origin = "the default storage" if url == DEFAULT_STORAGE else url
        return (f"no study storage at {where} (nothing created): {origin} is a path relative to the folder flagopt "
                f"runs in ({Path.cwd()}); run it from the folder `flagopt run` ran in, or {how}")
    return f"no study storage at {where} (nothing created): {how}"


def open_storage(url: str | None, *, create: bool = True) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: any RDB URL, or ``journal:///path.log`` (a journal file, for NFS clusters).

    With ``create=False`` (the read-only verbs) a sqlite or journal file that does not exist, or a database without
    Optuna's tables, is an error: nothing is created on the way to saying "no such study".
    """
    url = storage_url(url)
    check_url(url)
    if is_server_url(url):
        check_server(url, create=create)
    path = storage_file(url)
    if path is not None:
        if not create and not path.exists():
            raise MissingStorage(url, None, missing_file_reason(url, path))
        if create:
            writable_folder(path.parent, "storage", "--storage")
        if url.startswith(SQLITE_PREFIX) and path.exists():
            check_sqlite_file(path, url, create=create)
    if url.startswith(JOURNAL_PREFIX):
        return optuna.storages.JournalStorage(JournalFile(str(path)))
    kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else None
    attempt = 0
    while True:
        try:
            # a reader of a database server never creates tables (check_server saw the schema complete)
            storage = optuna.storages.RDBStorage(url, engine_kwargs=kwargs,
                                                 skip_table_creation=not create and is_server_url(url))
            # a server that stops answering is waited for (a restart, a failover) before the study stops
            return retrying(storage, shown_url(url)) if is_server_url(url) else storage
        except Exception as exc:  # sqlalchemy's errors are many; the user needs the URL and the cause
            # Two processes creating the same new storage at once (`run` starting while `status` opens it, two
            # drivers on a fresh database) race on the schema's tables and version rows; the loser finds the
            # schema there a moment later.
            attempt += 1
            racing = any(s in str(exc) for s in ("alembic_version", "already exists", "Duplicate entry"))
            if not racing or attempt >= 5:
                reason = db_reason(exc) if isinstance(exc, sqlalchemy.exc.DBAPIError) and is_server_url(url) else exc
                raise StudyError("--storage", shown_url(url), f"cannot open the study storage: {reason}") from None
            time.sleep(0.5)


def storage_url(url: str | None) -> str:
    return url or os.environ.get("FLAGOPT_STORAGE") or DEFAULT_STORAGE


def artifacts_root(url: str | None) -> Path:
    """Trial folders go under ``$FLAGOPT_ARTIFACTS`` when set, else beside a sqlite/journal file, else under
    ./studies (a database server: set ``$FLAGOPT_ARTIFACTS`` to a folder every driver host and node shares)."""
    if os.environ.get(ARTIFACTS_ENV):
        return Path(os.environ[ARTIFACTS_ENV]).expanduser().resolve()
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
        raise StudyError(shown_url(storage_url(url)), study_name, f"no such study (studies in this storage: {known})")
    return optuna.load_study(study_name=study_name, storage=storage)
