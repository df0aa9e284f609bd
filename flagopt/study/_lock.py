"""One driver per study: a lock file held for the driver's lifetime (released by the OS when it dies).

The file also says who holds it (pid, host) and when that driver last showed it was alive (``beat``, rewritten by a
heartbeat thread). ``--force`` takes the lock only from a holder shown to be dead: a pid that no longer runs on this
host, or, for a driver on another host sharing the folder, a heartbeat older than :data:`STALE_S`.

A study on a database server has no folder its drivers share: its lock is a row in the database
(:class:`DatabaseLock`, same rules); :func:`driver_lock` picks the one for a storage URL.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy

from flagopt.errors import StudyError
from flagopt.study._storage import JOURNAL_PREFIX, db_reason, server_engine, shown_url, storage_file, storage_url

#: how often a driver rewrites its heartbeat
HEARTBEAT_S = 10.0
#: how often a lock file's holder checks the file is still at its path (someone may delete it)
PATH_CHECK_S = 1.0
#: a holder on another host whose heartbeat is older than this is taken as dead
STALE_S = 120.0


def pid_running(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def holder_alive(holder: dict, *, now: float | None = None) -> str | None:
    """Why the lock's holder must be taken as alive, or ``None`` when it is shown to be dead."""
    pid, host = holder.get("pid"), holder.get("host")
    if not isinstance(pid, int) or not host:
        return "the lock file does not say who holds it"
    if host == socket.gethostname():
        return f"pid {pid} is running on this host" if pid_running(pid) else None
    age = (now or time.time()) - float(holder.get("beat") or holder.get("since") or 0)
    if age < STALE_S:
        return f"pid {pid} on {host} showed a heartbeat {age:.0f} s ago (taken as dead after {STALE_S:.0f} s without one)"
    return None


class StudyLock:
    def __init__(self, folder: Path, study_name: str) -> None:
        self.path = folder / f"{study_name}.lock"
        self.study_name = study_name
        self._fd: int | None = None
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None
        self._since = 0.0
        self.lost = False

    def acquire(self, *, force: bool = False) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self.holder()
            os.close(fd)
            alive = holder_alive(holder)
            if force and alive is None:
                # Shown dead (e.g. a driver on another host sharing the folder over NFS that stopped beating).
                self.path.unlink(missing_ok=True)
                return self.acquire(force=False)
            who = (f"pid {holder.get('pid')} on {holder.get('host')} since {time.ctime(holder.get('since', 0))}"
                   if holder else "holder unknown")
            if force:
                raise StudyError(str(self.path), self.study_name,
                                 f"--force refused: the driver holding the lock is alive ({alive}); stop it first "
                                 "(SIGTERM lets it record its running trials), then run again") from None
            raise StudyError(str(self.path), self.study_name,
                             f"another driver runs this study ({who}); stop it first, or pass --force if it is "
                             "dead") from None
        self._fd = fd
        self._since = time.time()
        self._write()
        self._stop.clear()
        self._beater = threading.Thread(target=self._beat, name="flagopt-lock-heartbeat", daemon=True)
        self._beater.start()

    def _write(self) -> None:
        if self._fd is None:
            return
        text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": self._since,
                           "beat": time.time()}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text, 0)

    def _beat(self) -> None:
        last = time.time()
        while not self._stop.wait(PATH_CHECK_S):  # the path each second, the heartbeat every HEARTBEAT_S
            try:
                self._keep_path()
                if time.time() - last >= HEARTBEAT_S:
                    self._write()
                    last = time.time()
            except OSError:
                pass  # a full or vanished disk: the lock itself still holds

    def _keep_path(self) -> None:
        """The lock file was deleted (or replaced) under this driver: lock a new one at the path at once, so a later
        driver finds it held; if another driver was quicker, say so (as the database lock does)."""
        if self._fd is None or self.lost:
            return
        try:
            if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                return
        except FileNotFoundError:
            pass
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.lost = True
            print(f"flagopt: warning: {self.path}: {self.study_name}: the lock file was deleted and another driver "
                  "took it; stop this driver", file=sys.stderr, flush=True)
            return
        old, self._fd = self._fd, fd
        os.close(old)  # its file is gone from the path: nobody can lock it again

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join(timeout=5)
            self._beater = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StudyLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# -- a database server ----------------------------------------------------------------------------------------------
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
