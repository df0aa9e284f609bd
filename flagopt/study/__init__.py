"""The study driver and the trial records every reader uses.

Example:
    >>> from flagopt.study import history, load_study
    >>> records = history(load_study(None, "demo"))  # doctest: +SKIP
"""

from __future__ import annotations

from flagopt.study._arms import Arm, arms_of
from flagopt.study._driver import StudyRunner
from flagopt.study._launching import PinnedNodesDown, write_trial_files
from flagopt.study._leaderboard import leaderboard, settings_text
from flagopt.study._observer import Observers, StudyObserver
from flagopt.study._planner import Plan, Planner, Verdict
from flagopt.study._progress import Progress
from flagopt.study._records import RunRecord, current_history, history, record_of
from flagopt.study._storage import DEFAULT_STORAGE, artifacts_root, load_study, open_storage, prepare_storage, study_folder

__all__ = [
    "DEFAULT_STORAGE", "Arm", "Observers", "PinnedNodesDown", "Plan", "Planner", "Progress", "RunRecord", "StudyObserver",
    "StudyRunner", "Verdict", "arms_of", "current_history",
    "artifacts_root", "history", "leaderboard", "load_study", "open_storage", "prepare_storage", "record_of", "settings_text", "study_folder", "write_trial_files",
]
