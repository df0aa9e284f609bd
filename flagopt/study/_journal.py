"""A journal file that survives a torn write (a full disk, a killed writer, NFS trouble mid-append).

Optuna's journal is one JSON operation per line. A write that stops half-way leaves a last line without its newline:
Optuna ignores it while it is last, but the next append lands on the same line and from then on every reader fails
with ``JSONDecodeError``. :class:`JournalFile` (a :class:`~optuna.storages.journal.JournalFileBackend`) cuts a torn
tail off before it appends (under the journal's own lock: no other writer is mid-write then), and reads a line that
an older writer already appended onto a torn one as the complete operation at its end. Anything else unreadable is
one :class:`~flagopt.errors.StudyError` that names the file and the line.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "j.log")
    >>> open(path, "w").write('{"op_code":0,"worker_id":"w","study_name":"a","directions":[1]}\\n{"op_code":5,"sta')
    81
    >>> JournalFile(path).append_logs([{"op_code": 1, "worker_id": "w", "study_id": 0}])
    >>> [log["op_code"] for log in JournalFile(path).read_logs(0)]
    [0, 1]
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from typing import Any

from optuna.storages.journal import JournalFileBackend
from optuna.storages.journal._file import get_lock_file

from flagopt.errors import StudyError

#: how every operation line starts (``json.dumps`` of a dict whose first key is ``op_code``)
_OP_START = b'{"op_code":'


def cut_torn_tail(path: str) -> int:
    """Truncate ``path`` after its last newline; the number of bytes cut (0 when the file ends whole)."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        # read backwards in blocks to the last newline: the torn line is one operation, rarely long
        end, block = size, 65536
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            chunk = f.read(end - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
        return size - keep


def _salvage(line: bytes) -> dict[str, Any] | None:
    """The complete operation at the end of a line written onto a torn one (``{"op_code":5,"sta{"op_code":...}``)."""
    at = line.rfind(_OP_START)
    if at <= 0:
        return None
    try:
        value = json.loads(line[at:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class JournalFile(JournalFileBackend):
    """Optuna's journal file backend that repairs a torn tail and reads over an old one (see the module)."""

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        with get_lock_file(self._lock):
            cut_torn_tail(self._file_path)
            text = "\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n"
            with open(self._file_path, "ab") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        # Optuna's own reader (optuna/storages/journal/_file.py), with a line per operation kept as the rule, a
        # torn-then-appended line read as its last operation, and a damaged line said in one sentence.
        with open(self._file_path, "rb") as f:
            remaining = os.stat(self._file_path).st_size
            start = 0
            if log_number_from in self._log_number_offset:
                f.seek(self._log_number_offset[log_number_from])
                start = log_number_from
                remaining -= self._log_number_offset[log_number_from]
            for number, line in enumerate(f, start=start):
                remaining -= len(line)
                if remaining < 0 or not line.endswith(b"\n"):
                    break  # a line still being written, or a torn last line: not an operation (yet)
                if number + 1 not in self._log_number_offset:
                    self._log_number_offset[number + 1] = self._log_number_offset[number] + len(line)
                if number < log_number_from:
                    continue
                try:
                    log = json.loads(line)
                except ValueError:
                    log = _salvage(line)
                if not isinstance(log, dict):
                    raise StudyError(self._file_path, None, f"the journal file is damaged at line {number + 1} "
                                     f"({line[:60]!r}...): restore it from a backup") from None
                yield log
