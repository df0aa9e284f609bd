"""Replica groups in the three forms XLA prints: explicit, iota, and mesh axes.

Example:
    >>> parse_replica_groups("{{0,1},{2,3}}").groups
    ((0, 1), (2, 3))
    >>> parse_replica_groups("[2,2]<=[2,2]T(1,0)").groups
    ((0, 2), (1, 3))
    >>> g = parse_replica_groups("mesh['x'=2,'y'=2] {'x'}")
    >>> g.form, g.groups
    ('mesh', ((0, 2), (1, 3)))
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaGroups:
    """Who talks to whom; ``groups`` is None when the text could not be expanded."""

    raw: str
    form: str  # explicit | iota | mesh | all | unknown
    groups: tuple[tuple[int, ...], ...] | None

    @property
    def num_groups(self) -> int | None:
        return len(self.groups) if self.groups is not None else None

    @property
    def group_size(self) -> int | None:
        return len(self.groups[0]) if self.groups else None

    def to_dict(self) -> dict[str, object]:
        return {
            "raw": self.raw,
            "form": self.form,
            "num_groups": self.num_groups,
            "group_size": self.group_size,
            "groups": [list(g) for g in self.groups] if self.groups is not None else None,
        }


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _iota(shape: list[int], dims: list[int], perm: list[int] | None) -> tuple[tuple[int, ...], ...]:
    ids = list(range(math.prod(dims)))
    if perm:
        # Transpose a row-major array of shape `dims` by `perm`, then read it row-major again.
        strides = [math.prod(dims[i + 1 :]) for i in range(len(dims))]
        out_dims = [dims[p] for p in perm]
        ids = [sum(idx[k] * strides[perm[k]] for k in range(len(perm))) for idx in itertools.product(*map(range, out_dims))]
    size = shape[-1] if len(shape) > 1 else len(ids)
    return tuple(tuple(ids[i : i + size]) for i in range(0, len(ids), size))


def _mesh(raw: str) -> tuple[tuple[int, ...], ...] | None:
    axes = [(name, int(size)) for name, size in re.findall(r"'([^']+)'\s*=\s*(\d+)", raw)]
    chosen = re.search(r"\]\s*\{([^}]*)\}", raw)
    if not axes or chosen is None or "device_ids" in raw:
        return None
    picked = set(re.findall(r"'([^']+)'", chosen.group(1)))
    names = [n for n, _ in axes]
    sizes = [s for _, s in axes]
    strides = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    outer = [i for i, n in enumerate(names) if n not in picked]
    inner = [i for i, n in enumerate(names) if n in picked]
    groups = []
    for fixed in itertools.product(*(range(sizes[i]) for i in outer)):
        group = []
        for free in itertools.product(*(range(sizes[i]) for i in inner)):
            coord = dict(zip(outer, fixed)) | dict(zip(inner, free))
            group.append(sum(coord[i] * strides[i] for i in range(len(sizes))))
        groups.append(tuple(group))
    return tuple(groups)


def parse_replica_groups(raw: str | None) -> ReplicaGroups | None:
    """Parse the value of ``replica_groups=``; None when the instruction has none."""
    if raw is None:
        return None
    text = raw.strip()
    try:
        if text.startswith("mesh"):
            return ReplicaGroups(text, "mesh", _mesh(text))
        iota = re.fullmatch(r"\[([\d,\s]+)\]\s*<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?", text)
        if iota:
            perm = _ints(iota.group(3)) if iota.group(3) else None
            return ReplicaGroups(text, "iota", _iota(_ints(iota.group(1)), _ints(iota.group(2)), perm))
        if text.startswith("{"):
            inner = re.findall(r"\{([\d,\s]*)\}", text[1:-1])
            if not inner:
                return ReplicaGroups(text, "all", None)
            return ReplicaGroups(text, "explicit", tuple(tuple(_ints(g)) for g in inner))
    except (ValueError, IndexError, ZeroDivisionError):
        pass
    return ReplicaGroups(text, "unknown", None)


def parse_pairs(raw: str | None) -> tuple[tuple[int, int], ...] | None:
    """``source_target_pairs={{0,1},{1,0}}`` as pairs."""
    if not raw:
        return None
    return tuple((a, b) for a, b in ((_ints(p) + [0, 0])[:2] for p in re.findall(r"\{([\d,\s]+)\}", raw)))
