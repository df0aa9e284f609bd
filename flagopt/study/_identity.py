"""A study's identity in its storage, and the trial folder tied to it.

A study name is unique only within one storage: two databases (or a sqlite file and a journal) may each hold a
``llama-pp`` study, and a team that shares ``$FLAGOPT_ARTIFACTS`` would see both write ``llama-pp/trials/N/``.
So the driver gives its study an id (study user attr ``flagopt.id``, a uuid, set once under the study lock) and
claims the study folder with it: ``<folder>/study.json`` names the id and the storage. A folder claimed by another
study is refused with one line; the lock itself lives in the storage (:mod:`flagopt.study._driver_lock`), not in
the folder.

A study of that name that flagopt did not make (no id, no fingerprint, trials or another direction) is refused too:
``run`` never adopts someone else's Optuna study.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "demo"
    >>> claim_folder(folder, "1f2e", "sqlite:///a.db", "demo")
    >>> claim_folder(folder, "1f2e", "sqlite:///a.db", "demo")  # the same study again: fine
    >>> claim_folder(folder, "9abc", "sqlite:///b.db", "demo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flagopt.errors.StudyError: ...: demo: this folder holds the trial folders of another study named 'demo' (in sqlite:///a.db, id 1f2e)...
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import optuna

from flagopt.errors import StudyError

#: the study user attr that names a study made by flagopt
ID_ATTR = "flagopt.id"
#: the file in a study folder that says which study owns it
MARKER = "study.json"


def stored_id(storage: optuna.storages.BaseStorage, name: str) -> str | None:
    """The id of the study ``name`` in ``storage`` (``None``: no such study, or it has none yet)."""
    try:
        return storage.get_study_user_attrs(storage.get_study_id_from_name(name)).get(ID_ATTR)
    except KeyError:
        return None


def check_folder(folder: Path, sid: str | None, shown_storage: str, name: str) -> None:
    """Before a study is created or changed: ``folder`` is free, or owned by study ``sid``."""
    owner = _owner(folder / MARKER)
    if owner.get("id") not in (None, sid):
        _refuse(folder, owner, sid, shown_storage, name)


def _owner(marker: Path) -> dict:
    try:
        owner = json.loads(marker.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _refuse(folder: Path, owner: dict, sid: str | None, shown_storage: str, name: str) -> None:
    raise StudyError(str(folder), name, f"this folder holds the trial folders of another study named {name!r} "
                     f"(in {owner.get('storage', 'another storage')}, id {owner.get('id')}); this study ("
                     f"{shown_storage}{f', id {sid}' if sid else ''}) would mix its logs with them: set "
                     f"$FLAGOPT_ARTIFACTS to another folder, or give the space another name (if that study was "
                     f"deleted, remove {folder / MARKER})") from None


def foreign_study(storage: optuna.storages.BaseStorage, name: str) -> str | None:
    """Why the study ``name`` in ``storage`` is not flagopt's (``None``: it is, or there is none yet)."""
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return None
    attrs = storage.get_study_user_attrs(study_id)
    if ID_ATTR in attrs or "flagopt.fingerprint" in attrs:
        return None
    directions = storage.get_study_directions(study_id)
    trials = len(storage.get_all_trials(study_id, deepcopy=False))
    if directions == [optuna.study.StudyDirection.MAXIMIZE] and not trials:
        return None  # made by a flagopt driver that stopped before it stored anything: carry on
    shown = ", ".join(d.name.lower() for d in directions)
    return f"direction {shown}, {trials} trials, no flagopt fingerprint"


def check_identity(storage: optuna.storages.BaseStorage, name: str, folder: Path, shown_storage: str) -> None:
    """Before ``run`` creates or changes the study ``name``: it is flagopt's (or new), and ``folder`` is not another
    storage's study's; else one :class:`StudyError`."""
    foreign = foreign_study(storage, name)
    if foreign:  # never adopt (and flip the trials of) an Optuna study someone else made
        raise StudyError(shown_storage, name, f"a study of this name that flagopt did not make is in this storage "
                                              f"({foreign}); give the space another `name:`, or use another --storage")
    check_folder(folder, stored_id(storage, name), shown_storage, name)


def study_id(study: optuna.Study) -> str:
    """The study's id, given now when it has none (call it under the study lock)."""
    known = study.user_attrs.get(ID_ATTR)
    if isinstance(known, str) and known:
        return known
    new = uuid.uuid4().hex
    study.set_user_attr(ID_ATTR, new)
    return new


def claim_folder(folder: Path, sid: str, shown_storage: str, name: str) -> None:
    """Make ``folder`` the trial folder of study ``sid``, or refuse when another study owns it."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    text = json.dumps({"id": sid, "study": name, "storage": shown_storage}) + "\n"
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        owner = _owner(marker)
        if owner.get("id") in (None, sid):
            if owner.get("id") is None:
                marker.write_text(text)  # an empty or torn marker (a crash while claiming): claim it again
            return
        _refuse(folder, owner, sid, shown_storage, name)
    with os.fdopen(fd, "w") as f:
        f.write(text)
