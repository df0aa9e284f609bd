"""Threshold values that bracket the collective sizes a dump actually has, as a space-file snippet.

For a combine threshold the three brackets are: one below the smallest per-layer op (nothing merges), one that
holds a whole layer's ops of that kind (a layer merges), one that holds every op of the step (everything could
merge). All are powers of two so they read as round sizes.

Example:
    >>> print(space_snippet({"all-gather": [67108864, 268435456]}), end="")
    params:
      ag_threshold:
        xla: xla_gpu_all_gather_combine_threshold_bytes
        choices: [67108864, 268435456]  # 64 MiB, 256 MiB
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import yaml

from flagopt.evidence._format import human_bytes
from flagopt.evidence._model import HloEvidence


@cache
def threshold_flags() -> dict[str, dict[str, str]]:
    """The kind -> {flag, param, effect} table from ``thresholds.yaml``."""
    text = resources.files("flagopt.evidence").joinpath("thresholds.yaml").read_text()
    data: dict[str, dict[str, str]] = yaml.safe_load(text)
    return data


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def _pow2_below(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length() - 1)


def layer_ops(ev: HloEvidence, kind: str) -> tuple[str, list[int]]:
    """The computation whose ops of ``kind`` move the most bytes per step, and those ops' sizes.

    In a scanned model that is the layer loop's body, so its ops are one layer's collectives.
    """
    per_comp: dict[str, list[Any]] = defaultdict(list)
    for c in ev.of_kind(kind):
        if c.bytes > 0:
            per_comp[c.computation].append(c)
    if not per_comp:
        return "", []
    comp = max(per_comp, key=lambda k: sum((c.bytes_per_step or c.bytes) for c in per_comp[k]))
    return comp, [c.bytes for c in per_comp[comp]]


def suggest_brackets(ev: HloEvidence) -> dict[str, list[int]]:
    """Per kind with a threshold flag, ascending threshold values (bytes) around the sizes in ``ev``.

    Kinds the module does not have are left out.
    """
    out: dict[str, list[int]] = {}
    for kind, spec in threshold_flags().items():
        _, sizes = layer_ops(ev, kind)
        if not sizes:
            continue
        ops = [c for c in ev.of_kind(kind) if c.bytes > 0]
        if spec["effect"] == "combine":
            everything = sum((c.bytes_per_step or c.bytes) for c in ops)
            values = {_pow2_at_least(sum(sizes)), _pow2_at_least(everything)}
            if min(sizes) > 1:
                values.add(_pow2_below(min(sizes)))
        else:  # decompose: at or below the smallest op (all decompose), above the largest (none does)
            all_sizes = sorted({c.bytes for c in ops})
            values = {1 << (all_sizes[0].bit_length() - 1), _pow2_at_least(all_sizes[-1] + 1)}
            if len(all_sizes) > 1:
                values.add(1 << (all_sizes[-1].bit_length() - 1))
        out[kind] = sorted(values)
    return out


def space_snippet(brackets: Mapping[str, Sequence[int]], header: bool = True) -> str:
    """YAML ``params:`` entries for a space file, one per kind, with the sizes spelled out in a comment."""
    table = threshold_flags()
    lines = ["params:"] if header else []
    pad = "  " if header else ""
    for kind, values in brackets.items():
        if kind not in table or not values:
            continue
        spec = table[kind]
        ints = [int(v) for v in values]
        choices = yaml.safe_dump(ints, default_flow_style=True).strip()
        lines += [
            f"{pad}{spec['param']}:",
            f"{pad}  xla: {spec['flag']}",
            f"{pad}  choices: {choices}  # {', '.join(human_bytes(v) for v in ints)}",
        ]
    return "\n".join(lines) + "\n"
