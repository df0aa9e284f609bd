"""Trial records: what every finished run stores as Optuna user attrs, and how readers get them back.

The record type itself (:class:`~flagopt.decide.RunRecord`) belongs to the decision engine, which reads nothing else;
this module turns Optuna trials into records.
"""

from __future__ import annotations

import optuna

from flagopt.decide import (BASELINE, CANCELLED, CANCELLED_WITH_DRIVER, FAILED, FLAKE, INFEASIBLE, INVALID, NO_ENV, OK,
                            RUNNING, RunRecord)

__all__ = ["BASELINE", "CANCELLED", "CANCELLED_WITH_DRIVER", "FAILED", "FLAKE", "INFEASIBLE", "INVALID", "NO_ENV", "OK",
           "RUNNING", "RunRecord", "current_history", "history", "record_of"]


def record_of(trial: optuna.trial.FrozenTrial) -> RunRecord | None:
    attrs = trial.user_attrs
    if "kind" not in attrs:
        return None
    status = attrs.get("status") or (RUNNING if trial.state == optuna.trial.TrialState.RUNNING else FAILED)
    return RunRecord(
        number=trial.number,
        kind=attrs["kind"],
        profile=attrs.get("profile", attrs["kind"]),
        config_key=attrs.get("config_key", ""),
        status=status,
        steady=attrs.get("steady"),
        t=float(attrs.get("started_at") or (trial.datetime_start.timestamp() if trial.datetime_start else 0.0)),
        gain=attrs.get("gain"),
        attrs=dict(attrs),
        params=dict(trial.params),
    )


def history(study: optuna.Study) -> list[RunRecord]:
    """Every flagopt trial of the study in trial-number order."""
    out = []
    for trial in study.get_trials(deepcopy=False):
        rec = record_of(trial)
        if rec is not None:
            out.append(rec)
    return out


def current_history(study: optuna.Study) -> list[RunRecord]:
    """The records of the study's current epoch: after ``run --rebaseline`` older trials are not comparable."""
    epoch = int(study.user_attrs.get("flagopt.epoch", 0))
    return [r for r in history(study) if int(r.attrs.get("epoch", 0)) == epoch]
