"""The report's A/B section: every ``flagopt ab`` record beside the study (``<study folder>/ab/*.json``), each
patch's A/B gain next to what the study claims for it."""

from __future__ import annotations

from flagopt.ab import arm_lines, load_records, pct
from flagopt.study import StudyData, study_folder


def ab_lines(data: StudyData, exported: tuple[int, str] | None) -> tuple[tuple[str, ...], str | None]:
    """Markdown list lines of every A/B of this study, oldest first, and a TL;DR line for the newest A/B of the
    export the report recommends (``exported``: its trial and label; the TL;DR line is ``None`` when no A/B
    verified that configuration)."""
    records = load_records(study_folder(data.storage, data.name) / "ab")
    lines: list[str] = []
    tldr = None
    for record in records:
        doc = record.doc
        if not doc.get("summary"):
            continue
        runs = sum(1 for r in doc["runs"] if r.get("status") == "ok")
        state = "" if doc.get("state") == "done" else f", {doc.get('state')}: {doc.get('stop_reason') or ''}".rstrip(": ")
        lines.append(f"**{doc['id']}** ({doc['pairs']} rounds on {doc['executor'].get('kind')}, {runs} runs measured"
                     f"{state}; `{record.path}`):")
        lines += [f"  - {line}" for line in arm_lines(doc)]
        for arm, summary in zip(doc["arms"][1:], doc["summary"]["arms"][1:]):
            claim = arm.get("claim") or {}
            if exported is not None and (claim.get("trial") == exported[0] or claim.get("label") == exported[1]):
                est = summary["vs_deployed"]
                agree = summary.get("agreement")
                tldr = (f"Independent A/B of the export ({doc['id']}): {pct(est['gain'], est['ci'])} over "
                        f"{est['pairs']} interleaved pairs, **{summary['verdict']}**"
                        + (f"; {agree['text']}" if agree else ""))
    return tuple(lines), tldr
