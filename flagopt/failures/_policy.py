"""What the study does with each failure class: retry, exclude, stop, or count the trial anyway.

``retries`` is how many times the same configuration is re-run for that class; once they are used up the trial is
recorded with ``status`` and, where ``stop_study`` is set, the study stops with a report (immediately when
``retries`` is 0). Each class counts its own failures in a chain of retries, and a chain ends after
``MAX_CHAIN_RETRIES`` retries whatever their classes (:func:`after_failure`).

| class | status | retries | then |
|---|---|---|---|
| oom | infeasible | 0 | record the requested size; never retried |
| unknown-flag | invalid | 0 | exclude that flag value from sampling |
| nccl-init | flake | 3 | record as an infra flake, continue |
| coordination-timeout | flake | 2 | stop the study (the cluster is unhealthy) |
| hang | flake | 1 | a deterministic deadlock would cost a full hang deadline per retry |
| node-failure | flake | 0 | stop the study with a report |
| preemption | flake | 3 | resubmit; not the configuration's fault |
| time-limit | failed | 1 | retry once (a slow start or queue hiccup), then failed |
| cancelled | cancelled | 0 | someone cancelled it on purpose |
| launch-failure | flake | 2 | the runner never reported: the executor or the machine, not the configuration |
| benign-exit | ok | 0 | the window is complete: a success |
| numerics-nan | failed | 0 | |
| numerics-drift | ok | 0 | a success, flagged for review |
| incomplete | failed | 0 | the command ran fewer steps than the window |
| crash | failed | 0 | |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from flagopt import failure_classes as s


@dataclass(frozen=True)
class Handling:
    """The policy for one failure class.

    Attributes:
        retries: re-runs of the same configuration before giving up.
        infeasible: the configuration cannot run here (tell the sampler it violates a constraint).
        exclude_value: the offending flag value must not be sampled again.
        stop_study: stop the whole study once retries are used up.
        counts_as_success: the measurement is valid (the trial's value is used).
        status: the trial record's ``status`` once retries are used up.
        flagged: keep the value but mark it for review.
    """

    retries: int
    infeasible: bool
    exclude_value: bool
    stop_study: bool
    counts_as_success: bool
    status: str
    flagged: bool = False


def _h(retries: int, status: str, *, infeasible: bool = False, exclude: bool = False, stop: bool = False,
       success: bool = False, flagged: bool = False) -> Handling:  # fmt: skip
    return Handling(retries, infeasible, exclude, stop, success, status, flagged)


HANDLING: Mapping[str, Handling] = MappingProxyType(
    {
        s.OOM: _h(0, "infeasible", infeasible=True),
        s.UNKNOWN_FLAG: _h(0, "invalid", exclude=True),
        s.NCCL_INIT: _h(3, "flake"),
        s.COORDINATION_TIMEOUT: _h(2, "flake", stop=True),
        s.HANG: _h(1, "flake"),
        s.NODE_FAILURE: _h(0, "flake", stop=True),
        s.PREEMPTION: _h(3, "flake"),
        s.TIME_LIMIT: _h(1, "failed"),
        s.CANCELLED: _h(0, "cancelled"),
        s.LAUNCH_FAILURE: _h(2, "flake"),
        s.BENIGN_EXIT: _h(0, "ok", success=True),
        s.NUMERICS_NAN: _h(0, "failed"),
        s.NUMERICS_DRIFT: _h(0, "ok", success=True, flagged=True),
        s.INCOMPLETE: _h(0, "failed"),
        s.CRASH: _h(0, "failed"),
    }
)

#: The handling of a clean trial (``classify`` returned ``None``).
SUCCESS = _h(0, "ok", success=True)


#: A configuration is re-run at most this many times in a row, whatever the classes of its failures. Each class counts
#: only its own: a hang, then an NCCL init failure, then one coordination timeout on one configuration is three
#: unrelated flakes, not a coordination service that timed out three times, and stopping the study there threw away a
#: study 41 runs in with a +7 % winner half confirmed (benchmark flaky-2029).
MAX_CHAIN_RETRIES = 3
RETRY, STOP, RECORD = "retry", "stop", "record"


def after_failure(failure_class: str, earlier: Sequence[str]) -> str:
    """What follows a failure of ``failure_class``, given the classes of the same chain's ``earlier`` failures (the
    first run and its retries): ``"retry"``, ``"stop"`` (the class used up its retries and stops the study) or
    ``"record"`` (keep the trial with its handling's status and go on).

    Example:
        >>> after_failure("coordination-timeout", ["coordination-timeout", "coordination-timeout"])
        'stop'
        >>> after_failure("coordination-timeout", ["hang", "nccl-init"])
        'retry'
        >>> after_failure("coordination-timeout", ["hang", "nccl-init", "nccl-init"])
        'record'
    """
    handling = HANDLING[failure_class]
    own = sum(1 for c in earlier if c == failure_class)
    if own < handling.retries and len(earlier) < MAX_CHAIN_RETRIES:
        return RETRY
    if handling.stop_study and own >= handling.retries:
        return STOP
    return RECORD


def handling_for(failure_class: str | None) -> Handling:
    """The handling of a class (``None``: success).

    Example:
        >>> handling_for("nccl-init").retries
        3
    """
    return SUCCESS if failure_class is None else HANDLING[failure_class]
