"""What an HLO dump says about a step's collectives: the records :func:`flagopt.evidence.analyze` returns."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flagopt.evidence._groups import ReplicaGroups

#: Collective kinds in a stable display order.
KINDS: tuple[str, ...] = (
    "all-gather", "reduce-scatter", "all-reduce", "collective-permute", "all-to-all", "ragged-all-to-all",
    "collective-broadcast", "send", "recv",
)  # fmt: skip


@dataclass(frozen=True)
class Loop:
    """A ``while`` instruction and the computations it runs."""

    name: str
    computation: str  # where the while instruction is
    body: str
    condition: str
    trip_count: int | None  # from backend_config known_trip_count, when XLA knows it


@dataclass(frozen=True)
class Collective:
    """One collective as issued in the module (a ``-start``/``-done`` pair counts once)."""

    name: str
    kind: str
    opcode: str  # as written: all-gather, all-gather-start, async-start, fusion, send...
    computation: str
    line: int
    shapes: tuple[str, ...]  # every operand of a combined (tuple) collective
    dtypes: tuple[str, ...]
    bytes: int  # result bytes, the size XLA's combiners compare with their thresholds
    is_async: bool
    done: str | None = None
    done_computation: str | None = None
    crosses_iteration: bool = False  # started in one loop iteration, finished in the next
    loops: tuple[str, ...] = ()  # enclosing while instructions, outermost first
    executions: int | None = 1  # times per module run (product of known trip counts)
    replica_groups: ReplicaGroups | None = None
    source_target_pairs: tuple[tuple[int, int], ...] | None = None
    channel_id: int | None = None
    frontend_attributes: dict[str, str] = field(default_factory=dict)
    collective_backend_config: dict[str, Any] = field(default_factory=dict)
    scheduling: dict[str, str] = field(default_factory=dict)  # pipelining / scheduling markers found

    @property
    def in_loop(self) -> bool:
        return bool(self.loops)

    @property
    def is_pipelined(self) -> bool:
        return bool(self.collective_backend_config.get("is_pipelined")) or "_xla_send_recv_pipeline" in self.scheduling

    @property
    def bytes_per_step(self) -> int | None:
        return None if self.executions is None else self.bytes * self.executions

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "opcode": self.opcode,
            "computation": self.computation,
            "line": self.line,
            "shapes": list(self.shapes),
            "dtypes": list(self.dtypes),
            "bytes": self.bytes,
            "is_async": self.is_async,
            "done": self.done,
            "done_computation": self.done_computation,
            "crosses_iteration": self.crosses_iteration,
            "in_loop": self.in_loop,
            "loops": list(self.loops),
            "executions": self.executions,
            "bytes_per_step": self.bytes_per_step,
            "is_pipelined": self.is_pipelined,
            "is_sync": self.collective_backend_config.get("is_sync"),
            "replica_groups": self.replica_groups.to_dict() if self.replica_groups else None,
            "source_target_pairs": [list(p) for p in self.source_target_pairs] if self.source_target_pairs else None,
            "channel_id": self.channel_id,
            "scheduling": dict(sorted(self.scheduling.items())),
            "frontend_attributes": dict(sorted(self.frontend_attributes.items())),
        }


@dataclass(frozen=True)
class KindSummary:
    """All collectives of one kind in the module."""

    kind: str
    count: int
    async_count: int
    in_loop_count: int
    executions: int | None  # per module run; None if a loop's trip count is unknown
    bytes: int  # sum over the ops as written
    bytes_per_step: int | None
    share: float | None  # of all collective bytes per step (static bytes when trip counts are unknown)
    dtypes: tuple[str, ...]
    shapes: tuple[str, ...]  # distinct, largest first
    pipelined_count: int
    crosses_iteration_count: int

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _sum_or_none(values: Iterable[int | None]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


@dataclass(frozen=True)
class HloEvidence:
    """The collectives of one optimized HLO module, and how sure we are about them."""

    source: str
    module: str
    lines_read: int
    truncated: bool
    collectives: tuple[Collective, ...]
    loops: tuple[Loop, ...] = ()
    warnings: tuple[str, ...] = ()
    selection: str = ""  # why this module was picked from a dump directory

    def of_kind(self, kind: str) -> list[Collective]:
        return [c for c in self.collectives if c.kind == kind]

    def summary(self) -> dict[str, KindSummary]:
        """Per kind, in :data:`KINDS` order; kinds absent from the module are left out."""
        per_step = _sum_or_none(c.bytes_per_step for c in self.collectives)
        static = sum(c.bytes for c in self.collectives)
        out: dict[str, KindSummary] = {}
        for kind in sorted({c.kind for c in self.collectives}, key=lambda k: (KINDS + (k,)).index(k)):
            ops = self.of_kind(kind)
            kind_step = _sum_or_none(c.bytes_per_step for c in ops)
            kind_static = sum(c.bytes for c in ops)
            if per_step is not None and kind_step is not None:
                share = kind_step / per_step if per_step else None
            else:
                share = kind_static / static if static else None
            shapes = sorted({(c.bytes, ", ".join(c.shapes)) for c in ops}, reverse=True)
            out[kind] = KindSummary(
                kind=kind,
                count=len(ops),
                async_count=sum(c.is_async for c in ops),
                in_loop_count=sum(c.in_loop for c in ops),
                executions=_sum_or_none(c.executions for c in ops),
                bytes=kind_static,
                bytes_per_step=kind_step,
                share=share,
                dtypes=tuple(sorted({d for c in ops for d in c.dtypes})),
                shapes=tuple(s for _, s in shapes),
                pipelined_count=sum(c.is_pipelined for c in ops),
                crosses_iteration_count=sum(c.crosses_iteration for c in ops),
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys (``schema`` versions them)."""
        return {
            "schema": "flagopt.evidence/1",
            "source": self.source,
            "module": self.module,
            "selection": self.selection,
            "lines_read": self.lines_read,
            "truncated": self.truncated,
            "warnings": list(self.warnings),
            "loops": [loop.__dict__ for loop in self.loops],
            "summary": {k: s.to_dict() for k, s in self.summary().items()},
            "collectives": [c.to_dict() for c in self.collectives],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)
