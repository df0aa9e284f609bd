"""Failure classes, their log signatures (data: ``signatures.yaml``) and what the study does about each."""

from __future__ import annotations

from flagopt.failure_classes import (
    BENIGN_EXIT,
    CANCELLED,
    COORDINATION_TIMEOUT,
    CRASH,
    FAILURE_CLASSES,
    HANG,
    INCOMPLETE,
    LAUNCH_FAILURE,
    NCCL_INIT,
    NODE_FAILURE,
    NUMERICS_DRIFT,
    NUMERICS_NAN,
    OOM,
    PREEMPTION,
    TIME_LIMIT,
    UNKNOWN_FLAG,
)
from flagopt.failures._classify import Failure, classify
from flagopt.failures._policy import (
    HANDLING,
    MAX_CHAIN_RETRIES,
    RECORD,
    RETRY,
    STOP,
    SUCCESS,
    Handling,
    after_failure,
    handling_for,
)
from flagopt.failures._signatures import Signature, signatures_from_data

__all__ = [
    "BENIGN_EXIT",
    "CANCELLED",
    "COORDINATION_TIMEOUT",
    "CRASH",
    "FAILURE_CLASSES",
    "HANDLING",
    "MAX_CHAIN_RETRIES",
    "HANG",
    "INCOMPLETE",
    "LAUNCH_FAILURE",
    "NCCL_INIT",
    "NODE_FAILURE",
    "NUMERICS_DRIFT",
    "NUMERICS_NAN",
    "OOM",
    "PREEMPTION",
    "RECORD",
    "RETRY",
    "STOP",
    "SUCCESS",
    "TIME_LIMIT",
    "UNKNOWN_FLAG",
    "Failure",
    "Handling",
    "after_failure",
    "Signature",
    "classify",
    "handling_for",
    "signatures_from_data",
]
