"""The failure class names: the vocabulary a space file writes, :mod:`flagopt.failures` classifies into, and the
report groups by.

They sit at the bottom of the layers (like :mod:`flagopt.errors`) because the space loader checks the names a
space's ``failures.signatures`` use, below the classifier that needs flags and logs.

Example:
    >>> FAILURE_CLASSES[0], OOM in FAILURE_CLASSES
    ('unknown-flag', True)
"""

from __future__ import annotations

OOM = "oom"
UNKNOWN_FLAG = "unknown-flag"
NCCL_INIT = "nccl-init"
COORDINATION_TIMEOUT = "coordination-timeout"
HANG = "hang"
NODE_FAILURE = "node-failure"
PREEMPTION = "preemption"
LAUNCH_FAILURE = "launch-failure"
TIME_LIMIT = "time-limit"
CANCELLED = "cancelled"
BENIGN_EXIT = "benign-exit"
NUMERICS_NAN = "numerics-nan"
NUMERICS_DRIFT = "numerics-drift"
INCOMPLETE = "incomplete"
CRASH = "crash"

#: Every failure class, highest precedence first (see :func:`flagopt.failures.classify`).
FAILURE_CLASSES = (
    UNKNOWN_FLAG, OOM, NUMERICS_NAN, BENIGN_EXIT, NUMERICS_DRIFT, NODE_FAILURE, PREEMPTION, NCCL_INIT,
    COORDINATION_TIMEOUT, HANG, TIME_LIMIT, CANCELLED, LAUNCH_FAILURE, CRASH, INCOMPLETE,
)  # fmt: skip
