"""What the engine hands the driver: a run to launch (:class:`Plan`), a verdict, or a slot to give up; and the
small record-level facts every part of the engine shares."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flagopt.decide import _design as design
from flagopt.decide._arms import SETTLE, Arm
from flagopt.decide._runs import BASELINE, NO_ENV, RunRecord
from flagopt.space import Param, TrialConfig

SAMPLE = "sample"
#: The screen's run of the best value of every param whose pooled effect is above zero.
COMBINATION = "combination"
#: Designs whose configuration the effects model proposes (not one param alone): the combination, add-one variants.
MODEL_DESIGNS = (COMBINATION, "add-one")

@dataclass(frozen=True)
class Plan:
    """One run to launch."""

    config: TrialConfig
    kind: str  # recorded kind: baseline-deployed | baseline-no-env | profile | sampled | repeat | evidence
    reason: str
    repeat_of: int | None = None
    retry_of: int | None = None
    retries: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)  # recorded on the trial as they are
    slot: str = ""  # where it runs: set by the driver when it launches the plan

    def retry(self, reason: str, first: int) -> Plan:
        """This plan launched once more after a failure of the infrastructure (``first``: the run it retries).

        A run made after a winner's choice stays one (``phase: settle``): its claim reads those runs alone. A retry
        that lost the mark counted toward the winner's confirmation instead, and the planner asked for another run
        after the choice, with the race in between (flaky-1000: 10 runs from the first such run to the verdict).
        """
        kept = {"phase": SETTLE} if self.attrs.get("phase") == SETTLE else {}
        return Plan(self.config, self.kind, reason, repeat_of=self.repeat_of, retry_of=first, retries=self.retries + 1,
                    attrs=kept)


@dataclass(frozen=True)
class SlotBroken:
    """A slot that cannot measure anything (its baseline keeps failing there): the driver stops using it."""

    slot: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    """Why the study stopped, with the evidence behind it (stored on the study as ``flagopt.verdict``)."""

    reason: str  # win | null | budget | time | stopped | baseline-failed
    message: str
    winner: dict[str, Any] | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)
    noise: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "message": self.message, "winner": self.winner, "tried": self.tried,
                "noise": self.noise, "decided_at": time.time()}


def config_of(rec: RunRecord) -> TrialConfig:
    """The configuration a recorded run used, to run it again."""
    if rec.kind in (BASELINE, NO_ENV):
        return TrialConfig(kind=rec.kind, profile=rec.kind)
    s = rec.attrs.get("settings") or {}
    return TrialConfig(kind="repeat", profile=rec.profile, xla=tuple((s.get("xla") or {}).items()),
                       libtpu=tuple((s.get("libtpu") or {}).items()), env=tuple((s.get("env") or {}).items()),
                       args=tuple((s.get("args") or {}).items()))


def arm_summary(arm: Arm) -> dict[str, Any]:
    """An arm as the verdict and the study attrs store it.

    ``gain``/``ci`` are what people read and act on: from the runs after the first when there are any (the first
    run is what selected the arm, so it is high by selection), else the single run's. ``all_runs_gain`` and
    ``all_runs_ci`` use every run.
    """
    est, shown = arm.estimate, arm.reported
    return {"label": arm.label, "config_key": arm.config_key, "trial": arm.first.number, "kind": arm.kind,
            "settings": arm.first.attrs.get("settings"), "runs": arm.n, "verdict": arm.verdict,
            "gain": shown.gain if shown else None, "ci": [shown.lo, shown.hi] if shown else None,
            "fresh_runs": arm.fresh_runs,
            "all_runs_gain": est.gain if est else None, "all_runs_ci": [est.lo, est.hi] if est else None,
            "numerics_flagged": arm.numerics_flagged}


def counted_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs that count against ``max_trials``, in order.

    An invalid run (an unknown flag) never ran the job, and one cancelled with the driver (Ctrl-C, a time limit's
    SIGTERM, a driver that died before submitting it, a lost slot) measured nothing and is run again on resume:
    neither spends budget. A job someone cancelled (scancel) does: that was a decision about that run.
    """
    return [r for r in records if r.status != "invalid" and not r.stopped_with_driver]


def runs_used(records: Sequence[RunRecord]) -> int:
    """How many runs count against ``max_trials`` (:func:`counted_runs`)."""
    return len(counted_runs(records))


def asked_before(kind: str, records: Sequence[RunRecord], in_flight: Sequence[Plan] = ()) -> list[str]:
    """The labels of the study's runs of design ``kind``, in flight included (a run cancelled with the driver asked
    nothing: a resumed study asks again).

    Example:
        >>> asked_before("drop-one", [])
        []
    """
    return [label for label, _ in asked_settings(kind, records, in_flight)]


#: What joins a move-one or swap-one variant's base label and the setting it changed (:func:`variant_label`).
_WITH = " with "


#: How a drop-one variant's label begins: ``without NAME: the settings it keeps``.
DROPPED = "without "


def dropped_before(records: Sequence[RunRecord], in_flight: Sequence[Plan] = ()) -> set[str]:
    """The params whose drop-one question (does it matter in the best configuration?) a run has asked already, or
    one in flight is asking (a run cancelled with the driver asked nothing: a resumed study asks it again).

    Example:
        >>> dropped_before([])
        set()
    """
    return {label[len(DROPPED):].split(": ")[0] for label in asked_before("drop-one", records, in_flight)
            if label.startswith(DROPPED)}


def variant_label(base_label: str, param: Param, value: Any) -> str:
    """The label of ``base_label``'s configuration with ``param`` moved or swapped to ``value``; :func:`varied_param`
    reads the param back (which param a swap-one run swapped: one swap is asked per param).

    Example:
        >>> label = variant_label("combination: x", Param("NCCL_PROTO", "env", "NCCL_PROTO", choices=("LL",)), "LL")
        >>> label, varied_param(label)
        ('combination: x with NCCL_PROTO=LL', 'NCCL_PROTO')
    """
    return f"{base_label}{_WITH}{design.probe_label(param, value)}"


def varied_param(label: str) -> str:
    """The param a :func:`variant_label` names last."""
    return label.rsplit(_WITH, 1)[-1].split("=", 1)[0]


def asked_settings(kind: str, records: Sequence[RunRecord],
                   in_flight: Sequence[Plan] = ()) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """The labels and settings (``{"xla": {...}, "env": {...}, ...}``, as a trial records them) of the study's runs of
    design ``kind``, in flight included, as :func:`asked_before`.

    Example:
        >>> asked_settings("profile-add-one", [])
        []
    """
    asked = [(str(r.profile), dict(r.attrs.get("settings") or {})) for r in records
             if r.attrs.get("design") == kind and not r.stopped_with_driver]
    return asked + [(str(p.config.profile), p.config.settings()) for p in in_flight if p.attrs.get("design") == kind]


def settings_set(arm: Arm) -> frozenset[tuple[str, str, str]]:
    settings = arm.first.attrs.get("settings") or {}
    return frozenset((part, key, str(value)) for part, values in settings.items() for key, value in (values or {}).items())


def seconds_per_run(records: Sequence[RunRecord]) -> float:
    """Typical wall time of one run: drift is measured per second, controls are spaced in runs."""
    spans = [float(r.attrs["ended_at"]) - float(r.attrs["started_at"]) for r in records
             if r.attrs.get("ended_at") and r.attrs.get("started_at")]
    return sum(spans) / len(spans) if spans else 1.0


def settle_doubt(arm: Arm) -> str:
    """A sentence when the runs made after ``arm``'s choice read below the whole interval of the runs that confirmed
    it, else ``""``: two runs that slow are more likely a slow node than the configuration, and the claim the user
    reads comes from them alone (win10-strag-3012: both 5 % slow, the win claimed +3.3 % [-0.4, +7.1] for a true
    +9.5 % after its fresh runs read +12.4 % [+9.1, +15.7])."""
    after, before = arm.settled, arm.claim
    if after is None or before is None or not after.hi < before.lo:
        return ""
    return (f"; its runs after the choice read below the interval of the runs that confirmed it "
            f"({before.gain:+.1%} [{before.lo:+.1%}, {before.hi:+.1%}]): if a slow node or a neighbour's job measured "
            "them, the claim is low; `flagopt ab` measures the export against the deployed job")
