"""A readable table of an :class:`HloEvidence`, for people (``to_json`` is the one for programs)."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table

from flagopt.evidence._model import Collective, HloEvidence


def human_bytes(n: float | None) -> str:
    """Binary units, as XLA flags are usually read.

    Example:
        >>> human_bytes(134217728), human_bytes(2254857830), human_bytes(4)
        ('128 MiB', '2.1 GiB', '4 B')
    """
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            text = f"{n:.1f}" if unit != "B" and n != int(n) else f"{int(n)}"
            return f"{text} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _summary_table(ev: HloEvidence) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title=f"collectives in {ev.module or ev.source}", title_justify="left")
    for col in ("kind", "ops", "async", "in loop", "runs/step", "bytes/step", "share", "pipelined"):
        table.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True)
    for kind, s in ev.summary().items():
        table.add_row(
            kind, str(s.count), str(s.async_count), str(s.in_loop_count),
            "?" if s.executions is None else str(s.executions), human_bytes(s.bytes_per_step),
            "?" if s.share is None else f"{100 * s.share:.1f} %", str(s.pipelined_count),
        )  # fmt: skip
    return table


def _detail_table(ev: HloEvidence) -> Table:
    """One row per group of alike ops: same kind, place, shapes and async-ness."""
    groups: dict[tuple, list[Collective]] = {}
    for c in ev.collectives:
        groups.setdefault((c.kind, c.computation, c.shapes, c.is_async), []).append(c)
    table = Table(box=box.SIMPLE_HEAD, title="ops", title_justify="left")
    for col in ("kind", "where", "shape", "ops", "bytes/op", "runs/step", "bytes/step", "mode", "groups"):
        right = col in ("ops", "bytes/op", "runs/step", "bytes/step")
        table.add_column(col, justify="right" if right else "left", overflow="fold", no_wrap=col in ("kind", "mode"))
    for (kind, comp, shapes, is_async), ops in groups.items():
        first = ops[0]
        loop = f" ({first.loops[-1]} x{first.executions})" if first.loops else ""
        runs = None if first.executions is None else first.executions * len(ops)
        per_step = None if runs is None else runs * first.bytes
        mode = ("async" if is_async else "sync") + (" pipelined" if any(o.is_pipelined for o in ops) else "")
        rg = first.replica_groups
        groups_text = "" if rg is None else f"{rg.num_groups}x{rg.group_size}" if rg.groups else rg.raw
        table.add_row(kind, comp + loop, ", ".join(shapes), str(len(ops)), human_bytes(first.bytes),
                      "?" if runs is None else str(runs), human_bytes(per_step), mode, groups_text)
    return table


def format_table(ev: HloEvidence, width: int = 120) -> str:
    """The per-kind summary, the ops grouped by shape and place, the loops, and every warning, as plain text."""
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, highlight=False)
    console.print(f"source: {ev.source}" + (f"  ({ev.selection})" if ev.selection else ""))
    if not ev.collectives:
        console.print("no collectives in this module (a single-device program, or not the train step?)")
    else:
        console.print(_summary_table(ev))
        console.print(_detail_table(ev))
    for loop in ev.loops:
        inside = [c for c in ev.collectives if loop.name in c.loops]
        trips = "unknown" if loop.trip_count is None else str(loop.trip_count)
        console.print(f"while {loop.name} (body {loop.body}): trip count {trips}, {len(inside)} collective(s) inside")
    markers = sorted({f"{k}={v}" if v else k for c in ev.collectives for k, v in c.scheduling.items()})
    if markers:
        console.print("scheduling markers: " + ", ".join(markers))
    crossing = sum(c.crosses_iteration for c in ev.collectives)
    if crossing:
        console.print(f"{crossing} async collective(s) start in one loop iteration and finish in the next")
    for warning in ev.warnings:
        console.print(f"warning: {warning}")
    return out.getvalue()
