"""Trial records: what every finished run stores as Optuna user attrs, and how readers get it back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import optuna

BASELINE = "baseline-deployed"
NO_ENV = "baseline-no-env"

OK = "ok"
FAILED = "failed"
INFEASIBLE = "infeasible"
INVALID = "invalid"
FLAKE = "flake"
CANCELLED = "cancelled"
#: The attr a run cancelled with the driver (its stop, death, verdict or a lost slot) carries; see ``stopped_with_driver``.
CANCELLED_WITH_DRIVER = MappingProxyType({"cancelled_by": "driver"})
RUNNING = "running"


@dataclass(frozen=True)
class RunRecord:
    """One trial as readers see it (a flat view of the user attrs)."""

    number: int
    kind: str
    profile: str
    config_key: str
    status: str
    steady: float | None
    t: float  # when the measurement ran (start time), for drift correction
    gain: float | None
    attrs: dict[str, Any] = field(default_factory=dict, repr=False)
    params: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == OK and self.steady is not None and math.isfinite(self.steady)

    @property
    def is_baseline(self) -> bool:
        return self.kind == BASELINE

    @property
    def stopped_with_driver(self) -> bool:
        """Cancelled because the driver stopped, died, decided or lost the run's slot, not because someone cancelled
        this job: it measured nothing about its configuration, spends no budget and runs again on resume."""
        return self.status == CANCELLED and all(self.attrs.get(k) == v for k, v in CANCELLED_WITH_DRIVER.items())

    @property
    def slot(self) -> str:
        """The node group it ran on (``""`` for a study of one slot)."""
        return str(self.attrs.get("slot") or "")

    @property
    def label(self) -> str:
        if self.kind == "sampled" or (self.kind == "repeat" and self.profile == "sampled"):
            return f"sampled#{self.attrs.get('repeat_of') or self.number}"
        return self.profile


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
