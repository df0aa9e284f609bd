"""Why a flag wins: the collectives in an XLA dump, threshold brackets, and the pipeline bubble model.

* :func:`analyze` reads one optimized HLO module (a dump directory or one ``*after_optimizations.txt``).
* :func:`format_table` / :meth:`HloEvidence.to_json` show it to people / programs.
* :func:`suggest_brackets` and :func:`space_snippet` turn the sizes into threshold choices for a space file.
* :func:`bubble_fraction` and :func:`bubble_table` model the pipeline bubble against measured gains.
* :func:`explain` writes the report's "why the winning flag wins" sentences.
* :func:`compare_programs` says whether two dumps are the same program (a flag that cannot change speed).

Example:
    >>> from flagopt.evidence import bubble_fraction
    >>> bubble_fraction(stages=4, microbatches=8)
    0.2727272727272727
"""

from __future__ import annotations

from flagopt.evidence._analyze import analyze, find_modules, pick_module
from flagopt.evidence._brackets import space_snippet, suggest_brackets, threshold_flags
from flagopt.evidence._bubble import BubbleRow, bubble_fraction, bubble_table
from flagopt.evidence._explain import explain
from flagopt.evidence._format import format_table, human_bytes
from flagopt.evidence._groups import ReplicaGroups, parse_replica_groups
from flagopt.evidence._model import KINDS, Collective, HloEvidence, KindSummary, Loop
from flagopt.evidence._same import ProgramComparison, compare_programs, compare_texts

__all__ = [
    "KINDS",
    "BubbleRow",
    "Collective",
    "HloEvidence",
    "KindSummary",
    "Loop",
    "ProgramComparison",
    "ReplicaGroups",
    "analyze",
    "bubble_fraction",
    "bubble_table",
    "compare_programs",
    "compare_texts",
    "explain",
    "find_modules",
    "format_table",
    "human_bytes",
    "parse_replica_groups",
    "pick_module",
    "space_snippet",
    "suggest_brackets",
    "threshold_flags",
]
