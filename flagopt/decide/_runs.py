"""One run as the decision engine reads it: a flat, storage-free view of a trial's record (its user attrs)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

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


def flakes_note(records: Sequence[RunRecord]) -> str:
    """What the budget lost to the machine: the launches that failed for a reason no setting causes (each counts
    against ``max_trials``, issue 16), with what to do about it; ``""`` where none did.

    On flaky infrastructure (8 % of launches failing) a 60-run study measures about 55 runs, and held-out
    +6 to +25 % winners were confirmed in 92.5 % of 120 studies against 97.5 % on a healthy cluster
    (docs/benchmark-decisions.md, twenty-third-session note).

    Example:
        >>> flakes_note([])
        ''
    """
    flakes = sum(1 for r in records if r.status == FLAKE and not r.stopped_with_driver)
    if not flakes:
        return ""
    return (f", {flakes} of them infrastructure failures (NCCL, coordination service, hangs, preemption) that "
            "measured nothing: raise max_trials by as many to measure as much as on a healthy cluster")
