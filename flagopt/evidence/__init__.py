"""Why a flag wins: the collectives in an XLA dump, threshold brackets, and the pipeline bubble model.

Example:
    >>> from flagopt.evidence import bubble_fraction
    >>> bubble_fraction(stages=4, microbatches=8)
    0.2727272727272727
"""

from __future__ import annotations

from flagopt.evidence._analyze import analyze, find_modules, pick_module
from flagopt.evidence._groups import ReplicaGroups, parse_replica_groups
from flagopt.evidence._model import KINDS, Collective, HloEvidence, KindSummary, Loop

__all__ = [
    "KINDS",
    "Collective",
    "HloEvidence",
    "KindSummary",
    "Loop",
    "ReplicaGroups",
    "analyze",
    "find_modules",
    "parse_replica_groups",
    "pick_module",
]
