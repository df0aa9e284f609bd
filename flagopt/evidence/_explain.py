"""Sentences for a report's "why the winning flag wins" section, each backed by what the dumps show.

Example:
    >>> from flagopt.evidence import Collective, HloEvidence
    >>> ag = Collective("ag", "all-gather", "all-gather", "body", 1, ("bf16[4096,16384]",), ("bf16",),
    ...                 134217728, True, loops=("while.1",), executions=16)
    >>> ev = HloEvidence("dump.txt", "m", 10, False, (ag, ag))
    >>> explain({"xla": {"xla_gpu_all_gather_combine_threshold_bytes": 1 << 27}}, ev)[1]
    'the winning all-gather threshold of 128 MiB holds one all-gather (128 MiB) but not the 256 MiB of the 2 per-layer all-gathers in body, so each stays a separate op'
"""

from __future__ import annotations

from collections.abc import Mapping

from flagopt.evidence._brackets import layer_ops, threshold_flags
from flagopt.evidence._format import human_bytes as hb
from flagopt.evidence._model import HloEvidence, KindSummary

_KIND_WORDS = {"all_gather": "all-gather", "reduce_scatter": "reduce-scatter", "all_reduce": "all-reduce",
               "p2p": "collective-permute", "collective_permute": "collective-permute"}  # fmt: skip


def _flat(settings: Mapping[str, object]) -> dict[str, object]:
    """A trial record's ``settings`` ({"xla": {...}, "env": {...}}) or a plain {flag: value} mapping."""
    out: dict[str, object] = {}
    for key, value in settings.items():
        if key in ("xla", "libtpu", "env", "args") and isinstance(value, Mapping):
            out.update({str(k).lstrip("-"): v for k, v in value.items()})
        else:
            out[str(key).lstrip("-")] = value
    return out


def _as_int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _is_on(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "on", "yes")


def _n(count: int, kind: str) -> str:
    return f"{count} {kind}" + ("" if count == 1 else "s")


def _overview(ev: HloEvidence) -> str:
    """The collectives that carry the step's traffic: kinds under 1 % of the bytes are left out of the sentence."""
    parts = []
    summary = ev.summary()
    for kind, s in summary.items():
        if s.share is not None and s.share < 0.01 and len(summary) > 1:
            continue
        amount = hb(s.bytes_per_step if s.bytes_per_step is not None else s.bytes)
        share = "" if s.share is None else f", {100 * s.share:.0f} % of collective bytes"
        runs = s.executions or s.count
        ops = f" ({_n(s.count, 'op')} in the module)" if runs != s.count else ""
        parts.append(f"{_n(runs, kind)}{ops} moving {amount}{share}")
    return "each baseline step runs " + "; ".join(parts)


def _combine(kind: str, value: int, base: HloEvidence, winner: HloEvidence | None) -> list[str]:
    comp, sizes = layer_ops(base, kind)
    ops = base.of_kind(kind)
    step_total = sum((c.bytes_per_step or c.bytes) for c in ops)
    layer = sum(sizes)
    head = f"the winning {kind} threshold of {hb(value)}"
    if value < min(sizes):
        text = f"{head} is below the smallest per-layer {kind} ({hb(min(sizes))}), so no {kind}s are combined"
    elif value < layer:
        fit, total = 0, 0
        for size in sorted(sizes):
            if total + size > value:
                break
            fit, total = fit + 1, total + size
        merge = "each stays a separate op" if fit <= 1 else f"at most {fit} of them can merge into one op"
        text = (f"{head} holds one {kind} ({hb(min(sizes))}) but not the {hb(layer)} of the {len(sizes)} "
                f"per-layer {kind}s in {comp}, so {merge}")
    elif value < step_total:
        text = (f"{head} holds the {len(sizes)} {kind}s of one layer ({hb(layer)} in {comp}) but is below the "
                f"{hb(step_total)} {kind} total per step, so a layer's {kind}s can be merged, not the whole step's")
    else:
        text = f"{head} is at least the {hb(step_total)} {kind} total per step, so nothing limits combining by size"
    out = [text]
    if winner is not None:
        after = winner.of_kind(kind)
        if len(after) < len(ops):
            out.append(f"the winner's dump has {len(after)} {kind} ops where the baseline has {len(ops)}: "
                       f"{len(ops) - len(after)} were combined")
        elif len(after) == len(ops):
            out.append(f"the winner's dump has the same {len(ops)} {kind} ops as the baseline: nothing was combined, "
                       f"so the threshold is not what changed the step")
        else:
            out.append(f"the winner's dump has more {kind} ops ({len(after)}) than the baseline ({len(ops)})")
    return out


def _decompose(kind: str, value: int, base: HloEvidence, winner: HloEvidence | None) -> list[str]:
    ops = base.of_kind(kind)
    big = [c for c in ops if c.bytes >= value]
    out = [f"with a {kind} decomposer threshold of {hb(value)}, {len(big)} of the baseline's {len(ops)} {kind} ops "
           f"are at or above it and become send/recv pairs"]
    if winner is not None:
        p2p = len(winner.of_kind("send")) + len(winner.of_kind("recv"))
        out.append(f"the winner's dump has {len(winner.of_kind(kind))} {kind}s and {p2p} send/recv ops "
                   f"(baseline: {len(ops)} and {len(base.of_kind('send')) + len(base.of_kind('recv'))})")
    return out


def _pipelining(flag: str, base: HloEvidence, winner: HloEvidence | None) -> list[str]:
    kind = next((k for w, k in _KIND_WORDS.items() if w in flag), None)
    if kind is None:
        return []
    kinds = {kind, "send", "recv"} if kind == "collective-permute" else {kind}
    in_loop = [c for c in base.collectives if c.kind in kinds and c.in_loop]
    if winner is None:
        runs = sum(c.executions or 1 for c in in_loop)
        return [f"{flag} acts on {kind}s inside while loops: the baseline has {len(in_loop)} ({runs} runs per step); "
                "a dump of the winner would show which of them XLA pipelined"]
    moved = [c for c in winner.collectives if c.kind in kinds and (c.crosses_iteration or c.is_pipelined)]
    before = [c for c in base.collectives if c.kind in kinds and (c.crosses_iteration or c.is_pipelined)]
    if not moved:
        return [f"the winner's dump shows no pipelined {kind}: none is marked is_pipelined or starts in one loop "
                f"iteration and finishes in the next, so {flag} did not change the module"]
    if len(moved) <= len(before):
        return [f"the winner's dump has {len(moved)} pipelined {kind} op(s) and the baseline's {len(before)}: "
                f"{flag} did not pipeline more of them"]
    pairs = "start/done pairs" if any(c.is_async for c in moved) else "ops"
    return [f"pipelining moved {len(moved) - len(before)} {kind} {pairs} across loop iterations "
            f"({len(moved)} in the winner's dump are is_pipelined or started an iteration ahead, "
            f"{len(before)} in the baseline's)"]


def _loops(flag: str, base: HloEvidence, winner: HloEvidence | None) -> list[str]:
    with_coll = [loop for loop in base.loops if any(loop.name in c.loops for c in base.collectives)]
    if winner is None:
        return [f"{flag} acts on while loops: the baseline has {len(with_coll)} loop(s) with collectives inside"] \
            if with_coll else []
    before = sorted(x.trip_count or 0 for x in base.loops)
    after = sorted(x.trip_count or 0 for x in winner.loops)
    if before == after:
        return [f"the winner's loops have the same trip counts as the baseline's ({before}): no unrolling is visible"]
    return [f"the winner's loop trip counts are {after} where the baseline's are {before}: the loops were unrolled"]


def _diff(base: HloEvidence, winner: HloEvidence) -> str:
    a, b = base.summary(), winner.summary()

    def key(s: KindSummary | None) -> tuple[int, int, int]:
        return (s.count, s.bytes, s.async_count) if s else (0, 0, 0)

    changes = [f"{k} ops {key(a.get(k))[0]} -> {key(b.get(k))[0]} ({hb(key(a.get(k))[1])} -> {hb(key(b.get(k))[1])}, "
               f"async {key(a.get(k))[2]} -> {key(b.get(k))[2]})" for k in dict.fromkeys([*a, *b])
               if key(a.get(k)) != key(b.get(k))]  # fmt: skip
    if not changes:
        return ("the winner's module has the same collectives as the baseline (kinds, counts, sizes, async): the gain "
                "does not come from a change in the communication the HLO shows")
    return "compared with the baseline, the winner's module changes: " + "; ".join(changes)


def explain(
    winner_settings: Mapping[str, object], baseline_ev: HloEvidence, winner_ev: HloEvidence | None = None
) -> list[str]:
    """Sentences on why the winning settings can change the step, from the baseline (and winner) dumps.

    Args:
        winner_settings: a trial record's ``settings`` dict or a plain ``{flag: value}`` mapping.
        baseline_ev: evidence from the baseline's dump.
        winner_ev: evidence from the winner's dump, when one was taken; without it only sizes are compared.
    """
    if not baseline_ev.collectives:
        return ["the baseline module has no collectives, so communication flags cannot explain a gain"]
    settings = _flat(winner_settings)
    out = [_overview(baseline_ev)]
    for kind, spec in threshold_flags().items():
        if spec["flag"] not in settings:
            continue
        value = _as_int(settings[spec["flag"]])
        if value is None:
            continue
        if not baseline_ev.of_kind(kind):
            out.append(f"{spec['flag']} is set but the baseline module has no {kind}, so it cannot change this step")
        elif spec["effect"] == "combine":
            out += _combine(kind, value, baseline_ev, winner_ev)
        else:
            out += _decompose(kind, value, baseline_ev, winner_ev)
    for flag, value in settings.items():
        if ("pipelined" in flag or flag.startswith("xla_gpu_pipeline_")) and (
            _is_on(value) or str(value).lower() in ("explicit",)
        ):
            out += _pipelining(flag, baseline_ev, winner_ev)
        elif "while_loop" in flag and str(value).lower() not in ("false", "0", "off"):
            out += _loops(flag, baseline_ev, winner_ev)
    if winner_ev is not None:
        out.append(_diff(baseline_ev, winner_ev))
    for ev, who in ((baseline_ev, "baseline"), (winner_ev, "winner")):
        if ev is not None and ev.truncated:
            out.append(f"the {who}'s dump is truncated ({ev.lines_read} lines read): counts above may be low")
    return out
