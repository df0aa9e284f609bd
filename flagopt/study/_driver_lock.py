"""The lock a driver takes for a study, kept with the study's storage: a row in the storage's own database
(:class:`DatabaseLock`) or, for a journal file, a lock file beside it (:class:`~flagopt.study._lock.StudyLock`);
:func:`driver_lock` picks the one for a storage URL. The rules are the lock file's: a holder shown dead on this host
is taken over at once, one on another host after :data:`~flagopt.study._lock.STALE_S` without a heartbeat and
``--force``.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy

from flagopt.errors import StudyError
from flagopt.study._lock import HEARTBEAT_S, STALE_S, StudyLock, pid_running
from flagopt.study._storage import JOURNAL_PREFIX, db_reason, server_engine, shown_url, storage_file, storage_url

#: the table, in the study storage's own database, where drivers on any host take a study's lock
LOCK_TABLE = "flagopt_driver_locks"
_LOCKS = sqlalchemy.Table(
    LOCK_TABLE, sqlalchemy.MetaData(),
    sqlalchemy.Column("study_name", sqlalchemy.String(512), primary_key=True),  # as long as Optuna's study names
    sqlalchemy.Column("host", sqlalchemy.String(255), nullable=False),
    sqlalchemy.Column("pid", sqlalchemy.Integer, nullable=False),
    sqlalchemy.Column("process", sqlalchemy.String(64)),  # boot id + start time: a recycled pid is not the holder
    sqlalchemy.Column("token", sqlalchemy.String(32), nullable=False),  # this acquisition (compare-and-delete)
    sqlalchemy.Column("since", sqlalchemy.Float, nullable=False),  # the holder's clock, to show
    sqlalchemy.Column("beat", sqlalchemy.DateTime, nullable=False),  # the server's clock: hosts' clocks may differ
)


def process_identity(pid: int) -> str | None:
    """``boot id:start time`` of ``pid`` on this host (``None`` where /proc does not say)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None
    return f"{boot}:{start}"


class DatabaseLock:
    """One driver per study for a storage on a database server: a row of :data:`LOCK_TABLE` keyed by the study name.

    The row is taken by an INSERT (the primary key lets one driver in), names its holder (host, pid and the process's
    start, so a recycled pid is never taken for the holder), and carries a heartbeat in the server's clock. The rules
    are those of :class:`StudyLock`: the row of a driver shown dead on this host (its process is gone, as after
    SIGKILL) is taken over at once, as the OS frees a dead driver's lock file; a holder on another host is alive
    while its heartbeat is younger than :data:`STALE_S`, and after that ``--force`` takes the row (only then: a
    partitioned network also stops heartbeats). Two drivers forcing at once: each deletes only the row it saw, so one
    of them gets the lock.

    Example:
        >>> lock = DatabaseLock("mysql+pymysql://flagopt:pw@127.0.0.1:3308/flagopt", "demo")  # doctest: +SKIP
        >>> with lock:  # doctest: +SKIP
        ...     lock.acquire()
    """

    def __init__(self, url: str, study_name: str) -> None:
        self.url, self.shown = url, shown_url(url)
        self.study_name = study_name
        # sqlite: wait for the file's write lock as Optuna's engine does, rather than fail at once
        self._engine = server_engine(url, **({"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}))
        self._token: str | None = None
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None
        self.lost = False

    def acquire(self, *, force: bool = False) -> None:
        try:
            self._acquire(force)
        except BaseException:
            self._engine.dispose()  # a refused driver leaves no connection open behind it
            raise

    def _acquire(self, force: bool) -> None:
        self._create_table()
        me = {"study_name": self.study_name, "host": socket.gethostname(), "pid": os.getpid(),
              "process": process_identity(os.getpid())}
        try:
            for _ in range(5):  # a holder that leaves, or another driver taking over the same dead holder, meanwhile
                token = uuid.uuid4().hex
                try:
                    with self._engine.begin() as db:
                        db.execute(_LOCKS.insert().values(**me, token=token, since=time.time(),
                                                          beat=sqlalchemy.func.current_timestamp()))
                except sqlalchemy.exc.IntegrityError:
                    holder = self.holder()
                    if not holder:
                        continue
                    alive = self._alive(holder)
                    if alive is None and (force or holder["host"] == me["host"]):
                        with self._engine.begin() as db:  # only the row this driver saw: compare-and-delete
                            db.execute(_LOCKS.delete().where(_LOCKS.c.study_name == self.study_name,
                                                             _LOCKS.c.token == holder["token"]))
                        continue
                    who = (f"pid {holder['pid']} on {holder['host']} since {time.ctime(holder['since'])}, "
                           f"last heartbeat {holder['age']:.0f} s ago"
                           + (f", which is over {STALE_S:.0f} s: it looks dead" if alive is None else ""))
                    if force:
                        raise StudyError(self.shown, self.study_name,
                                         f"--force refused: the driver holding the lock is alive ({alive}); stop it "
                                         "first (SIGTERM lets it record its running trials), then run again") from None
                    raise StudyError(self.shown, self.study_name,
                                     f"another driver runs this study ({who}); stop it first, or pass --force if it is "
                                     "dead") from None
                self._token = token
                self._stop.clear()
                self._beater = threading.Thread(target=self._beat, name="flagopt-lock-heartbeat", daemon=True)
                self._beater.start()
                return
        except sqlalchemy.exc.DBAPIError as exc:
            raise StudyError(self.shown, self.study_name, f"cannot take the study lock: {db_reason(exc)}") from None
        raise StudyError(self.shown, self.study_name, "cannot take the study lock: its holder kept changing; "
                                                      "run again")

    def _create_table(self) -> None:
        try:
            _LOCKS.create(self._engine, checkfirst=True)
        except sqlalchemy.exc.DBAPIError as exc:
            # Two first drivers on a fresh database: the loser finds the table there.
            try:
                if sqlalchemy.inspect(self._engine).has_table(LOCK_TABLE):
                    return
            except sqlalchemy.exc.DBAPIError:
                pass
            raise StudyError(self.shown, self.study_name, f"cannot create the lock table: {db_reason(exc)}") from None

    def _alive(self, holder: dict) -> str | None:
        """Why ``holder`` must be taken as alive, or ``None`` when it is shown dead (see the class's rules)."""
        if holder["host"] == socket.gethostname():
            pid = holder["pid"]
            if not pid_running(pid):
                return None
            same = holder["process"] is None or process_identity(pid) in (None, holder["process"])
            return f"pid {pid} is running on this host" if same else None
        if holder["age"] < STALE_S:
            return (f"pid {holder['pid']} on {holder['host']} showed a heartbeat {holder['age']:.0f} s ago (taken as "
                    f"dead after {STALE_S:.0f} s without one)")
        return None

    def holder(self) -> dict:
        """The lock's row (with ``age``: seconds since its heartbeat, by the server's clock), or ``{}``."""
        with self._engine.connect() as db:
            row = db.execute(sqlalchemy.select(_LOCKS, sqlalchemy.func.current_timestamp().label("now"))
                             .where(_LOCKS.c.study_name == self.study_name)).mappings().first()
        if row is None:
            return {}
        return {**dict(row), "age": max(0.0, (row["now"] - row["beat"]).total_seconds())}

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                with self._engine.begin() as db:
                    done = db.execute(_LOCKS.update().where(_LOCKS.c.study_name == self.study_name,
                                                            _LOCKS.c.token == self._token)
                                      .values(beat=sqlalchemy.func.current_timestamp())).rowcount
            except sqlalchemy.exc.SQLAlchemyError:
                continue  # the server is away for a moment: the row still holds; beat again later
            if not done:
                self.lost = True
                print(f"flagopt: warning: {self.shown}: {self.study_name}: another driver took this study's lock "
                      "(--force); stop this driver", file=sys.stderr, flush=True)
                return

    def release(self) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join(timeout=5)
            self._beater = None
        if self._token is not None:
            try:
                with self._engine.begin() as db:
                    db.execute(_LOCKS.delete().where(_LOCKS.c.study_name == self.study_name,
                                                     _LOCKS.c.token == self._token))
            except sqlalchemy.exc.SQLAlchemyError:
                pass  # the row stays: the next driver here finds this pid gone; elsewhere --force after STALE_S
            self._token = None
        self._engine.dispose()

    def __enter__(self) -> DatabaseLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def driver_lock(storage: str | None, folder: Path, study_name: str) -> StudyLock | DatabaseLock:
    """The lock for a study, kept with the study's storage (not in its trial folder, which ``$FLAGOPT_ARTIFACTS``
    moves and a user may delete): a row in the database for a sqlite file or a server URL, and for a journal file
    a lock file beside it (``<journal>.locks/<study>.lock``)."""
    url = storage_url(storage)
    if url.startswith(JOURNAL_PREFIX):
        journal = storage_file(url)
        return StudyLock(journal.parent / f"{journal.name}.locks", study_name)
    return DatabaseLock(url, study_name)
