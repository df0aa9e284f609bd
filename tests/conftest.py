"""Settings for the whole suite: temporary folders on a RAM file system where the machine has one with room.

Most tests run real studies whose storage is a sqlite file under ``tmp_path``; optuna commits once per trial
attribute, and each commit is an fsync (~10 ms on a virtual disk: about half of an in-process simulated study's
wall time). On ``/dev/shm`` the same sqlite file, trial folders and logs behave alike but an fsync costs nothing.
Nothing changes where ``TMPDIR`` or ``--basetemp`` already says where, or where ``/dev/shm`` is missing, read-only,
``noexec`` (tests run scripts they write) or has less than 2 GiB free (a container's 64 MiB default).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

RAM_DIR = "/dev/shm"
RAM_DIR_MIN_FREE = 2 << 30


def _ram_dir_usable(path: str) -> bool:
    try:
        flags = os.statvfs(path).f_flag
        free = shutil.disk_usage(path).free
    except OSError:
        return False
    return (not flags & (os.ST_RDONLY | os.ST_NOEXEC) and free >= RAM_DIR_MIN_FREE
            and os.access(path, os.W_OK | os.X_OK))


def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp or os.environ.get("TMPDIR") or not _ram_dir_usable(RAM_DIR):
        return
    os.environ["TMPDIR"] = RAM_DIR  # tmp_path and tempfile here; subprocesses, submitit and Slurm jobs inherit it
    tempfile.tempdir = None  # tempfile caches the folder it found first
