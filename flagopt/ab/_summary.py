"""What an A/B record says: per-round values, each patch against the deployed job, the agreement with the study's
claim, which patch is best, the rounds whose runs do not share one machine session, and the runs a slow node
measured (pure: reads the record's document, writes nothing)."""

from __future__ import annotations

from typing import Any

from flagopt.ab._estimate import BETTER, FAILS, Estimate, agreement, paired, pct
from flagopt.ab._stragglers import slow_runs, without

#: Run statuses that say something about the arm (an OOM in a patch is a finding); flakes and cancels do not.
FINDING_STATUSES = ("failed", "infeasible", "invalid")


def values_by_round(doc: dict[str, Any]) -> list[list[float | None]]:
    """``values[arm][round]``: the steady value of the arm's successful run in that round, else ``None``."""
    arms, rounds = len(doc["arms"]), int(doc["pairs"])
    out: list[list[float | None]] = [[None] * rounds for _ in range(arms)]
    for run in doc["runs"]:
        if run.get("status") == "ok" and run.get("steady") is not None and run["round"] < rounds:
            out[run["arm"]][run["round"]] = float(run["steady"])
    return out


def findings(doc: dict[str, Any], arm: int) -> list[dict[str, Any]]:
    """The runs of ``arm`` that failed for a reason of its own (after any retry)."""
    return [r for r in doc["runs"] if r["arm"] == arm and r.get("status") in FINDING_STATUSES]


def split_rounds(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Rounds whose successful runs come from more than one driver session or host.

    A round is the A/B's block: its runs are compared with each other only. A driver stopped mid-round and resumed
    later (possibly on a fresh cloud machine that reports the same host name) finishes the round in another
    session, so that round's pairs compare machines as well as patches. Runs carry the ``session`` that submitted
    them; in a record without it, a run cancelled with the driver marks where the next session began.

    Example:
        >>> runs = [{"round": 0, "arm": 0, "status": "ok", "session": "s1"},
        ...         {"round": 0, "arm": 1, "status": "ok", "session": "s2"},
        ...         {"round": 1, "arm": 1, "status": "ok", "session": "s2"}]
        >>> split_rounds({"runs": runs})
        [{'round': 0, 'sessions': 2, 'hosts': []}]
    """
    session, marker = 0, None
    seen: dict[int, tuple[set[Any], set[str]]] = {}
    for run in doc["runs"]:
        stamp = run.get("session")
        if stamp is not None and stamp != marker:
            session, marker = session + 1, stamp
        if run.get("status") == "ok":
            sessions, hosts = seen.setdefault(run["round"], (set(), set()))
            sessions.add(session)
            if run.get("host"):
                hosts.add(str(run["host"]))
        if stamp is None and run.get("cancelled_by") == "driver":
            session += 1  # an older record: the runs after a driver's cancel come from the next session
    return [{"round": rnd, "sessions": len(sessions), "hosts": sorted(hosts) if len(hosts) > 1 else []}
            for rnd, (sessions, hosts) in sorted(seen.items()) if len(sessions) > 1 or len(hosts) > 1]


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """The summary stored in the record (``summary``) and printed by ``flagopt ab``; see docs/report.md."""
    direction = doc.get("metric", {}).get("direction", "maximize")
    values = values_by_round(doc)
    deployed = values[0]
    split = split_rounds(doc)
    mixed = {r["round"] for r in split}
    slow = slow_runs(values, direction, (doc.get("noise") or {}).get("run_sigma"))
    kept = without(values, slow)

    def whole(row: list[float | None]) -> list[float | None]:
        """``row`` without the rounds split over two sessions."""
        return [None if rnd in mixed else v for rnd, v in enumerate(row)]

    arms_out: list[dict[str, Any]] = []
    estimates: dict[int, Estimate] = {}
    for i, arm in enumerate(doc["arms"]):
        entry: dict[str, Any] = {"name": arm["name"], "label": arm["label"], "values": values[i]}
        if i == 0:
            arms_out.append(entry)
            continue
        est = paired(values[i], deployed, direction)
        estimates[i] = est
        failed = findings(doc, i)
        verdict = f"{FAILS} ({failed[0].get('failure_class') or failed[0]['status']})" if failed else est.verdict
        claim = arm.get("claim") or {}
        agree = agreement(est, claim.get("gain"), claim.get("ci"))
        if split:
            # the same estimate over the rounds run in one session: what the A/B says without the mixed pairs
            entry["vs_deployed_whole_rounds"] = paired(whole(values[i]), whole(deployed), direction).to_json()
        if slow:
            # and without the runs a slow node measured: what the A/B says if they are not the patches' doing
            entry["vs_deployed_without_stragglers"] = paired(kept[i], kept[0], direction).to_json()
        entry.update(vs_deployed=est.to_json(), verdict=verdict,
                     failures=[{"round": r["round"], "status": r["status"], "failure_class": r.get("failure_class"),
                                "failure_reason": r.get("failure_reason")} for r in failed],
                     agreement=None if agree is None else {"agrees": agree[0], "text": agree[1]})
        arms_out.append(entry)
    out = {"direction": direction, "arms": arms_out, "best": _best(doc, values, estimates, direction),
           "split_rounds": split}
    if slow:
        out["stragglers"] = [{"round": s["round"], "arm": doc["arms"][s["arm"]]["name"], "reads": s["reads"]}
                             for s in slow]
    return out


def _best(doc: dict[str, Any], values: list[list[float | None]], estimates: dict[int, Estimate], direction: str) -> dict[str, Any] | None:
    """Which patch is best, and whether it is told apart from the runner-up in the same rounds."""
    ranked = sorted((i for i, e in estimates.items() if e.gain is not None and not findings(doc, i)),
                    key=lambda i: estimates[i].gain, reverse=True)
    if not ranked:
        return None
    top = ranked[0]
    name = doc["arms"][top]["name"]
    out: dict[str, Any] = {"arm": name if estimates[top].verdict == BETTER else None}
    if estimates[top].verdict != BETTER:
        out["text"] = "none of the patches beats the deployed job"
        return out
    text = f"best: {name} {pct(estimates[top].gain, (estimates[top].lo, estimates[top].hi))} vs deployed"
    if len(ranked) > 1:
        runner = ranked[1]
        vs = paired(values[top], values[runner], direction)
        other = doc["arms"][runner]["name"]
        out["vs_runner_up"] = {"arm": other, **vs.to_json()}
        told = "ahead of" if vs.verdict == BETTER else "not told apart from"
        text += f"; {told} {other} ({pct(vs.gain, (vs.lo, vs.hi))} in the same rounds)"
    out["text"] = text
    return out
