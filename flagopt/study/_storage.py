"""Where studies live: the Optuna storage URL and the per-trial artifact folders."""

from __future__ import annotations

import os
from pathlib import Path

import optuna

from flagopt.errors import StudyError

DEFAULT_STORAGE = "sqlite:///studies/flagopt.db"
JOURNAL_PREFIX = "journal:///"


def open_storage(url: str | None) -> optuna.storages.BaseStorage:
    """An Optuna storage for ``url``: any RDB URL, or ``journal:///path.log`` (a journal file, for NFS clusters)."""
    url = url or os.environ.get("FLAGOPT_STORAGE") or DEFAULT_STORAGE
    if url.startswith(JOURNAL_PREFIX):
        path = Path(url[len(JOURNAL_PREFIX) - 1:] if url.startswith("journal:////") else url[len(JOURNAL_PREFIX):])
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}} if url.startswith("sqlite") else None)
    except Exception as exc:  # sqlalchemy's errors are many; the user needs the URL and the cause
        raise StudyError("--storage", url, f"cannot open the study storage: {exc}") from None


def storage_url(url: str | None) -> str:
    return url or os.environ.get("FLAGOPT_STORAGE") or DEFAULT_STORAGE


def artifacts_root(url: str | None) -> Path:
    """Trial folders sit beside a sqlite/journal file, else under ./studies."""
    url = storage_url(url)
    for prefix in ("sqlite:///", JOURNAL_PREFIX):
        if url.startswith(prefix):
            return Path(url[len(prefix):]).expanduser().resolve().parent
    return Path("studies").resolve()


def study_folder(url: str | None, study_name: str) -> Path:
    return artifacts_root(url) / study_name


def load_study(url: str | None, study_name: str) -> optuna.Study:
    storage = open_storage(url)
    names = [s.study_name for s in optuna.study.get_all_study_summaries(storage)]
    if study_name not in names:
        known = ", ".join(sorted(names)) or "none"
        raise StudyError(storage_url(url), study_name, f"no such study (studies in this storage: {known})")
    return optuna.load_study(study_name=study_name, storage=storage)
