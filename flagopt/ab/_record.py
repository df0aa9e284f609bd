"""The A/B record: one JSON file per A/B beside the study (``<study folder>/ab/<id>.json``), rewritten after every
event so that a killed driver leaves it current and the same command picks it up again (docs/report.md)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from flagopt.errors import FlagoptError

SCHEMA = "flagopt.ab/1"
RUNNING, DONE, STOPPED = "running", "done", "stopped"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def patch_key(text: str) -> str:
    r"""What identifies a patch across invocations: its lines other than comments and blank ones.

    ``flagopt export`` stamps each export with its time; an export of the same winner written again (a script that
    re-exports before every ``flagopt ab``, as the 2xH200 validation did) is the same patch and resumes its A/B.

    Example:
        >>> patch_key("# exported 10:00\nexport A=1\n") == patch_key("# exported 11:00\n\nexport A=1")
        True
    """
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def record_key(space_name: str, executor: dict[str, Any], patch_hashes: list[str]) -> str:
    """What makes two invocations the same A/B: the space, where it runs, and the patches' contents in order."""
    text = json.dumps({"space": space_name, "executor": executor, "patches": patch_hashes}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class AbRecord:
    """One A/B: its arms, its plan, every run, and the summary once computed. ``doc`` is the JSON document."""

    def __init__(self, path: Path, doc: dict[str, Any]) -> None:
        self.path = path
        self.doc = doc

    # -- creating, finding, loading -----------------------------------------------------------------------------
    @classmethod
    def create(cls, folder: Path, **fields: Any) -> AbRecord:
        """A new record in ``folder`` (``<study folder>/ab``), named by the UTC time it starts."""
        folder.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        name, n = stamp, 1
        while (folder / f"{name}.json").exists() or (folder / name).exists():
            n += 1
            name = f"{stamp}-{n}"
        now = time.time()
        doc = {"schema": SCHEMA, "id": name, "state": RUNNING, "created_at": now, "updated_at": now, **fields,
               "runs": [], "summary": None}
        record = cls(folder / f"{name}.json", doc)
        record.dir.mkdir(parents=True)
        record.save()
        return record

    @classmethod
    def load(cls, path: Path) -> AbRecord:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise FlagoptError(str(path), None, f"not a readable A/B record: {exc}") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise FlagoptError(str(path), "schema", f"not a {SCHEMA} record")
        return cls(path, doc)

    @property
    def dir(self) -> Path:
        """The folder of this A/B's runs, job files and frozen patches."""
        return self.path.with_suffix("")

    # -- state --------------------------------------------------------------------------------------------------
    @property
    def runs(self) -> list[dict[str, Any]]:
        return self.doc["runs"]

    @property
    def arms(self) -> list[dict[str, Any]]:
        return self.doc["arms"]

    def save(self) -> None:
        """Write the whole document atomically (a reader never sees half a file)."""
        self.doc["updated_at"] = time.time()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)


def find_resumable(folder: Path, key: str) -> AbRecord | None:
    """The newest unfinished record of the same A/B (same ``key``) in ``folder``, or ``None``."""
    for record in reversed(load_records(folder)):
        if record.doc.get("key") == key and record.doc.get("state") != DONE:
            return record
    return None


def load_records(folder: Path) -> list[AbRecord]:
    """Every readable A/B record in ``folder``, oldest first (an unreadable file is skipped, never fatal here)."""
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            out.append(AbRecord.load(path))
        except FlagoptError:
            continue
    return out
