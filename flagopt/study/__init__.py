"""The study driver, the trial records, and the read model (:class:`StudyData`) every reader uses.

Example:
    >>> from flagopt.study import history, load_study, study_data
    >>> records = history(load_study(None, "demo"))  # doctest: +SKIP
    >>> study_data(None, "demo").best_arm.label  # doctest: +SKIP
    'tree'
"""

from __future__ import annotations

from flagopt.decide import Arm, Plan, Planner, Verdict, arms_of
from flagopt.study._collect import Collected, collect
from flagopt.study._delete import DeletedStudy, delete_study, describe_deletion
from flagopt.study._driver import StudyRunner
from flagopt.study._launching import PinnedNodesDown, write_trial_files
from flagopt.study._leaderboard import (NOISE_NOTE_DF, compact_settings, drift_disagreements, drift_note, gain_text,
                                       leaderboard, metric_label, metric_text, noise_note, param_names, settings_text,
                                       short_flag_names, straggler_note)
from flagopt.study._observer import Observers, StudyObserver
from flagopt.study._progress import Progress
from flagopt.study._records import RunRecord, current_history, history, record_of
from flagopt.study._study_data import (SlotSummary, StudyData, is_nan, noise_of, other_cells, slot_line, study_data,
                                       study_data_of)
from flagopt.study._storage import (DEFAULT_STORAGE, artifacts_root, load_study, open_storage, prepare_storage,
                                    shown_url, storage_url, study_folder)

__all__ = [
    "DEFAULT_STORAGE", "NOISE_NOTE_DF", "Arm", "Collected", "DeletedStudy", "delete_study", "describe_deletion", "Observers", "PinnedNodesDown",
    "Plan", "Planner", "Progress", "RunRecord",
    "SlotSummary", "StudyData", "StudyObserver", "StudyRunner", "Verdict", "arms_of", "current_history",
    "artifacts_root", "collect",
    "compact_settings", "drift_disagreements", "drift_note", "history", "metric_label", "metric_text", "is_nan", "leaderboard", "load_study", "noise_note", "noise_of",
    "open_storage",
    "gain_text", "other_cells", "param_names", "prepare_storage", "record_of", "settings_text", "short_flag_names", "shown_url",
    "slot_line", "storage_url", "straggler_note", "study_data",
    "study_data_of", "study_folder", "write_trial_files",
]
