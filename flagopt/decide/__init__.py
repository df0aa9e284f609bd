"""The decision engine: what to run next and when to stop, as pure functions of the study's records.

It reads runs (:class:`RunRecord`), never a storage or an executor: the driver (:mod:`flagopt.study`) asks it,
launches what it says and records the result. Its parts, one concern each: the screen's design (``_design``), the
arms and their estimates (``_arms``), the effects model over every run (``_model``), blame for deterministic failures
(``_blame``), the race (``_race``), the stop rules and verdicts (``_stop``) and the order of business
(``_planner``).

Example:
    >>> from flagopt.decide import Planner
    >>> Planner.__name__
    'Planner'
"""

from __future__ import annotations

from flagopt.decide._arms import Arm, arms_of, baseline_runs, stragglers, to_run, value_for
from flagopt.decide._blame import DETERMINISTIC, Blame, blame_failures, blamed_by, excluded_by
from flagopt.decide._design import (changed_settings, config_of_settings, deployed_values, probe_label, same_value,
                                    settings_of_record)
from flagopt.decide._grid import configurations, probe_order, probe_values, refine_values
from flagopt.decide._plan import SAMPLE, Plan, SlotBroken, Verdict, arm_summary, config_of, runs_used
from flagopt.decide._planner import Planner
from flagopt.decide._runs import (BASELINE, CANCELLED, CANCELLED_WITH_DRIVER, FAILED, FLAKE, INFEASIBLE, INVALID,
                                  NO_ENV, OK, RUNNING, RunRecord)

__all__ = [
    "BASELINE", "CANCELLED", "CANCELLED_WITH_DRIVER", "DETERMINISTIC", "FAILED", "FLAKE", "INFEASIBLE", "INVALID",
    "NO_ENV", "OK", "RUNNING", "SAMPLE", "Arm", "Blame", "Plan", "Planner", "RunRecord", "SlotBroken", "Verdict",
    "arm_summary", "arms_of", "baseline_runs", "blame_failures", "blamed_by", "changed_settings", "config_of",
    "config_of_settings", "configurations", "excluded_by", "deployed_values", "probe_label", "probe_order",
    "probe_values", "refine_values", "runs_used", "same_value",
    "settings_of_record", "stragglers", "to_run", "value_for",
]
