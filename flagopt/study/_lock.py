"""One driver per study: a lock file held for the driver's lifetime (released by the OS when it dies)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from flagopt.errors import StudyError


class StudyLock:
    def __init__(self, folder: Path, study_name: str) -> None:
        self.path = folder / "driver.lock"
        self.study_name = study_name
        self._fd: int | None = None

    def acquire(self, *, force: bool = False) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self.holder()
            os.close(fd)
            if force:
                # --force: the user says the holder is dead (e.g. on another host sharing the folder over NFS).
                self.path.unlink(missing_ok=True)
                return self.acquire(force=False)
            raise StudyError(str(self.path), self.study_name,
                             f"another driver runs this study (pid {holder.get('pid')} on {holder.get('host')} since "
                             f"{time.ctime(holder.get('since', 0))}); stop it first, or pass --force if it is dead") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode())
        self._fd = fd

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StudyLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
