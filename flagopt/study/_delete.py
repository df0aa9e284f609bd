"""Deleting a study: its Optuna study and its folder (trial folders, jobs, lock), never one without the other.

``optuna delete-study`` leaves ``studies/<name>/`` behind, and a study re-created under the same name would then
write ``trials/0``, ``trials/1``... over the old ones and keep the rest: a reader could not tell whose logs those are.

Example:
    >>> delete_study("sqlite:///studies/flagopt.db", "demo")  # doctest: +SKIP
    DeletedStudy(name='demo', trials=20, folder=PosixPath('.../studies/demo'), folder_existed=True)
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import optuna

from flagopt.errors import StudyError
from flagopt.study._driver_lock import driver_lock
from flagopt.study._identity import MARKER
from flagopt.study._storage import load_study, open_storage, shown_url, storage_url, study_folder


@dataclass(frozen=True)
class DeletedStudy:
    name: str
    trials: int
    folder: Path
    folder_existed: bool


def describe_deletion(storage: str | None, name: str) -> tuple[int, Path]:
    """What deleting ``name`` removes (its trial count and folder); raises when there is no such study."""
    study = load_study(storage, name)
    return len(study.get_trials(deepcopy=False)), study_folder(storage, name)


def delete_study(storage: str | None, name: str) -> DeletedStudy:
    """Remove study ``name`` from ``storage`` and its folder; refused while a driver runs it (its lock is held).

    Raises:
        StudyError: no such study, a live driver holds the study, or the folder cannot be removed.
    """
    study = load_study(storage, name)
    trials = len(study.get_trials(deepcopy=False))
    folder = study_folder(storage, name)
    existed = folder.exists()
    lock = driver_lock(storage, folder, name)
    try:
        lock.acquire()
    except StudyError as exc:  # "another driver runs this study (pid ... on host ...)"
        raise StudyError(exc.source, name, exc.reason.replace(", or pass --force if it is dead", "") +
                         "; nothing was deleted") from None
    try:
        optuna.delete_study(study_name=name, storage=study._storage)
        if folder.exists():  # the file lock lives in it (and created it when it was missing)
            try:
                shutil.rmtree(folder)
            except OSError as exc:
                raise StudyError(str(folder), name, f"the study was deleted from the storage but its folder was "
                                                    f"not: {exc.strerror or exc}; remove it by hand") from None
    finally:
        lock.release()
    return DeletedStudy(name, trials, folder, existed)


def set_aside_stale_trials(storage: str | None, name: str) -> Path | None:
    """Before a new study is created: move a deleted study's leftovers (``trials/``, ``jobs/``) out of the way.

    A study removed with ``optuna delete-study`` leaves its folder; the new study of that name would write its
    ``trials/0``, ``1``... over the old ones and keep the rest. Returns where they went, or ``None`` when the study
    exists already (a resume) or its folder holds no trials.
    """
    folder = study_folder(storage, name)
    leftovers = [folder / sub for sub in ("trials", "jobs") if (folder / sub).is_dir() and any((folder / sub).iterdir())]
    if not leftovers or name in optuna.get_all_study_names(open_storage(storage)):
        return None
    marker = folder / MARKER
    try:
        owner = json.loads(marker.read_text() or "{}")
    except (OSError, ValueError):
        owner = {}
    if isinstance(owner, dict) and owner.get("storage") not in (None, shown_url(storage_url(storage))):
        return None  # another storage's study of this name owns the folder: the identity check refuses, not this
    if marker.exists():
        leftovers.append(marker)  # the deleted study's claim on the folder goes with its trials
    aside = folder / f"stale-{time.strftime('%Y%m%d-%H%M%S')}"
    aside.mkdir()
    for path in leftovers:
        path.rename(aside / path.name)
    return aside
