"""An A/B summary as text: the per-round table and one line per patch (the console and the report use them)."""

from __future__ import annotations

from typing import Any

from flagopt.ab._estimate import pct
from flagopt.stats import STRAGGLER_SIGMAS


def _value(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def round_table(doc: dict[str, Any]) -> list[str]:
    """Rows of the per-round figures: every arm's steady value and each patch's gain over A in that round."""
    summary = doc.get("summary") or {}
    arms = summary.get("arms") or []
    if not arms:
        return []
    head = ["round", *(f"{a['name']} {a['label']}" for a in arms), *(f"{a['name']} vs A" for a in arms[1:])]
    rows = [head]
    deployed = arms[0]["values"]
    for rnd in range(len(deployed)):
        gains = []
        for a in arms[1:]:
            v, ref = a["values"][rnd], deployed[rnd]
            gain = None
            if v is not None and ref is not None:
                gain = v / ref - 1 if summary.get("direction", "maximize") == "maximize" else ref / v - 1
            gains.append(pct(gain))
        rows.append([str(rnd + 1), *(_value(a["values"][rnd]) for a in arms), *gains])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths)))
            for r in rows]


def arm_lines(doc: dict[str, Any]) -> list[str]:
    """One line per patch: gain and interval vs the deployed job, the verdict, the agreement with the claim."""
    out = []
    arms = (doc.get("summary") or {}).get("arms") or []
    by_name = {a["name"]: a for a in doc["arms"]}
    for a in arms[1:]:
        est = a["vs_deployed"]
        line = (f"{a['name']} {a['label']}: {pct(est['gain'], est['ci'])} vs deployed over {est['pairs']} "
                f"pair{'s' if est['pairs'] != 1 else ''} -> {a['verdict'].upper()}")
        if a.get("failures"):
            f = a["failures"][0]
            line += f" (round {f['round'] + 1}: {f.get('failure_reason') or f['status']})"
        claim = by_name.get(a["name"], {}).get("claim")
        if claim:
            where = f"trial {claim.get('trial')}" if claim.get("trial") is not None else "the study"
            line += f"; claim of {where}: {pct(claim.get('gain'), claim.get('ci'))}"
            agree = a.get("agreement")
            line += f", {agree['text'].split(':')[0]}" if agree else ", no A/B interval to compare"
        out.append(line)
    best = (doc.get("summary") or {}).get("best")
    if best and len(arms) > 2:
        out.append(best["text"])
    split = (doc.get("summary") or {}).get("split_rounds") or []
    if split:
        which = ", ".join(str(r["round"] + 1) for r in split)
        hosts = sorted({h for r in split for h in r.get("hosts") or ()})
        why = f"hosts {', '.join(hosts)}" if hosts else "a stop and a resume, possibly on another machine"
        line = (f"warning: round{'s' if len(split) > 1 else ''} {which} ran in more than one session ({why}): "
                "its pairs compare machines as well as patches")
        whole = [(a["name"], a.get("vs_deployed_whole_rounds")) for a in arms[1:]]
        shown = [f"{name} {pct(e['gain'], e['ci'])}" for name, e in whole if e and e.get("gain") is not None]
        out.append(line + (f"; over the other rounds: {', '.join(shown)}" if shown else ""))
    if line := straggler_line(doc):
        out.append(line)
    return out


def straggler_line(doc: dict[str, Any]) -> str:
    """The warning naming the runs a slow node measured, with each patch's estimate without them; ``""`` if none.

    Example:
        >>> summary = {"stragglers": [{"round": 2, "arm": "B", "reads": -0.05}],
        ...            "arms": [{"name": "A"}, {"name": "B", "vs_deployed_without_stragglers":
        ...                                      {"gain": 0.03, "ci": [0.028, 0.032]}}]}
        >>> straggler_line({"summary": summary, "noise": {"run_sigma": 0.003, "study": "fsdp"}, "pairs": 5})[:62]
        "warning: B's run in round 3 read 5.0 % below what B's other ro"
    """
    summary = doc.get("summary") or {}
    slow = summary.get("stragglers") or []
    if not slow:
        return ""
    runs = [f"{s['arm']}'s run in round {s['round'] + 1} read {-100 * s['reads']:.1f} % below what "
            + ("the other rounds say" if s["arm"] == "A" else f"{s['arm']}'s other rounds say") for s in slow]
    noise = doc.get("noise") or {}
    shown = [f"{a['name']} {pct(e['gain'], e['ci'])}" for a in summary.get("arms", [])[1:]
             if (e := a.get("vs_deployed_without_stragglers")) and e.get("gain") is not None]
    return (f"warning: {'; '.join(runs)}: more than {STRAGGLER_SIGMAS:g} sigmas of the run noise of study "
            f"{noise.get('study')} ({100 * float(noise.get('run_sigma') or 0):.2f} % a run), a slow node or a "
            "neighbour's job rather than "
            "a patch. The estimates above keep every run"
            + (f"; without {'them' if len(slow) > 1 else 'it'}: {', '.join(shown)}" if shown else "")
            + f". Check the nodes, or add rounds (the same command with --pairs {int(doc.get('pairs') or 0) + 2}).")
