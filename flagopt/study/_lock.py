"""One driver per study: a lock file held for the driver's lifetime (released by the OS when it dies).

The file also says who holds it (pid, host) and when that driver last showed it was alive (``beat``, rewritten by a
heartbeat thread). ``--force`` takes the lock only from a holder shown to be dead: a pid that no longer runs on this
host, or, for a driver on another host sharing the folder, a heartbeat older than :data:`STALE_S`.

A study on a database server has no folder its drivers share: its lock is a row in the database
(:class:`flagopt.study._driver_lock.DatabaseLock`, same rules), and :func:`~flagopt.study._driver_lock.driver_lock`
picks the one for a storage URL.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

from flagopt.errors import StudyError

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
