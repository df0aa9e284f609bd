"""Storage faults: a lost database connection, a full disk, a damaged file. They stop the study with one line.

A fault of where the study is kept is never a property of the configuration that was running: it is not recorded as
that configuration's failure, it spends no budget, and the next ``run`` resumes (re-attaching the runs in flight).
A database server that stops answering is waited for (:data:`DB_WAIT_S`, ``$FLAGOPT_DB_WAIT_S``) before the
driver gives up: :func:`retrying` wraps a storage so each call retries while the connection is lost.

Example:
    >>> import errno
    >>> storage_fault(OSError(errno.ENOSPC, "No space left on device", "/nfs/flagopt/s0/trials/3/rank0.log"))
    'No space left on device (/nfs/flagopt/s0/trials/3/rank0.log)'
    >>> storage_fault(ValueError("a bug")) is None
    True
"""

from __future__ import annotations

import errno
import functools
import os
import time
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy

from flagopt.errors import StudyError

#: how long a driver waits for a database server that stopped answering (seconds)
DB_WAIT_S = float(os.environ.get("FLAGOPT_DB_WAIT_S", "300"))
#: errors of a write that waiting does not mend: a full disk or quota, a file too large, an I/O error, read-only
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}
#: MySQL/MariaDB client errors of a lost or refused connection (2002/2003: cannot connect, 2006: gone away,
#: 2013: lost during a query, 2055: lost at reading), and server shutdown (1053)
_LOST_MYSQL = {1053, 2002, 2003, 2006, 2013, 2055}
#: what a log says when a job's folder could not be written (submitit's traceback, our own outcome)
WRITE_FAULT_WORDS = ("No space left on device", "Disk quota exceeded", "File too large", "Read-only file system")


class StorageFault(StudyError):
    """The study's storage or trial folders failed; the study stopped and the next ``run`` resumes it (exit 1)."""


def _cause(exc: BaseException) -> BaseException:
    """The database error under Optuna's ``StorageInternalError`` (it raises one ``from`` SQLAlchemy's)."""
    seen = exc
    for _ in range(5):
        if isinstance(seen, sqlalchemy.exc.SQLAlchemyError) or seen.__cause__ is None:
            return seen
        seen = seen.__cause__
    return seen


def lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` is a database connection that was lost or refused (worth waiting for)."""
    cause = _cause(exc)
    if not isinstance(cause, sqlalchemy.exc.DBAPIError):
        return False
    if cause.connection_invalidated:
        return True
    args = getattr(cause.orig, "args", ())
    return bool(args) and isinstance(args[0], int) and args[0] in _LOST_MYSQL


def storage_fault(exc: BaseException) -> str | None:
    """One sentence for a fault of the storage or the trial folders, or ``None`` when ``exc`` is something else."""
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        return f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
    cause = _cause(exc)
    if isinstance(exc, optuna.exceptions.StorageInternalError) or isinstance(cause, sqlalchemy.exc.SQLAlchemyError):
        orig = getattr(cause, "orig", None) or cause
        args = getattr(orig, "args", ())
        if len(args) == 2 and isinstance(args[0], int):  # MySQL drivers: (errno, message)
            return f"{args[1]} (MySQL error {args[0]})"
        return " ".join(str(orig).split())[:300] or type(orig).__name__
    return None


def as_storage_fault(exc: BaseException, shown_storage: str, study: str, kept: Path | None) -> StorageFault | None:
    """The one-line error a driver stops with for ``exc``, or ``None`` when ``exc`` is no storage fault.

    ``kept``: the sqlite or journal file (a write error on it is the storage's, any other the trial folders')."""
    if isinstance(exc, StorageFault):
        return exc
    why = storage_fault(exc)
    if why is None:
        return None
    trial_disk = isinstance(exc, OSError) and not (kept and exc.filename and Path(exc.filename) == kept)
    where = "a trial folder could not be written" if trial_disk else "the study storage failed"
    return StorageFault(shown_storage, study, f"{where} ({why}): the study stopped, runs in flight keep running and "
                                              "nothing was counted against a configuration; fix it and run again to "
                                              "resume")


def retrying(storage: optuna.storages.BaseStorage, source: str = "storage",
             wait_s: float | None = None) -> optuna.storages.BaseStorage:
    """``storage`` whose calls retry while the database connection is lost, for up to ``wait_s`` in all; ``source``
    (the URL as it may be shown) starts the error line."""
    wait_s = DB_WAIT_S if wait_s is None else wait_s
    for name in dir(optuna.storages.BaseStorage):
        if name.startswith("_") or not callable(getattr(storage, name, None)):
            continue
        setattr(storage, name, _retry(getattr(storage, name), wait_s, source))
    return storage


def _retry(call: Any, wait_s: float, source: str) -> Any:
    @functools.wraps(call)
    def retried(*args: Any, **kwargs: Any) -> Any:
        deadline = None
        pause = 1.0
        while True:
            try:
                return call(*args, **kwargs)
            except Exception as exc:
                if not lost_connection(exc):
                    raise
                deadline = deadline or time.monotonic() + wait_s
                if time.monotonic() >= deadline:
                    raise StorageFault(source, None, f"the database server did not answer for {wait_s:.0f} s "
                                       f"({storage_fault(exc)}): the study stopped; runs in flight keep running; run "
                                       "again when the server is back: the study resumes and re-attaches them") from None
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, 15.0)

    return retried
