"""The pipeline-bubble section: how much of a measured microbatch effect the GPipe bubble explains."""

from __future__ import annotations

import re
from typing import Any

from flagopt.evidence import BubbleRow, bubble_table
from flagopt.study import StudyData

_STAGES = re.compile(r"\bPP\s*=\s*(\d+)", re.IGNORECASE)
_MICROBATCH_ARG = re.compile(r"microbatch", re.IGNORECASE)


def bubble_of(data: StudyData) -> tuple[int | None, str | None, tuple[BubbleRow, ...]]:
    """(stages, the microbatch arg, one row per microbatch setting measured on its own), or empty when not a PP study.

    Stages come from the space's ``parallelism`` (``PP=4``); the reference is the deployed setting (gain 0 by
    definition); a measured gain is used only from configurations that change nothing but the microbatch count.
    """
    match = _STAGES.search(data.parallelism or "")
    space = data.space or {}
    baseline_args = (space.get("baseline") or {}).get("args") or {}
    arg = next((k for k in baseline_args if _MICROBATCH_ARG.search(k)), None)
    if arg is None:
        arg = next((p.get("arg") for p in (space.get("params") or {}).values()
                    if isinstance(p, dict) and _MICROBATCH_ARG.search(str(p.get("arg", "")))), None)
    if not match or arg is None or arg not in baseline_args:
        return None, None, ()
    stages = int(match.group(1))
    reference = int(baseline_args[arg])
    gains: dict[int, float] = {reference: 0.0}
    for arm in data.arms:
        settings: dict[str, Any] = arm.first.attrs.get("settings") or {}
        only_mb = set((settings.get("args") or {})) == {arg} and not any(settings.get(k) for k in ("xla", "libtpu", "env"))
        if only_mb and arm.estimate is not None:
            gains[int(settings["args"][arg])] = arm.estimate.gain
    settings_tried = sorted(gains)
    return stages, arg, tuple(bubble_table(stages, settings_tried, gains, reference=reference))


def bubble_markdown(stages: int | None, arg: str | None, rows: tuple[BubbleRow, ...]) -> list[str]:
    if not rows:
        return []
    out = ["", "## Pipeline bubble model", "",
           f"GPipe bubble (stages − 1) / (microbatches × V + stages − 1) with {stages} stages, V = 1, against the "
           f"measured gain of configurations that change only `{arg}` (vs the deployed setting).", "",
           "| microbatches | bubble | predicted Δ% | measured Δ% | measured ÷ predicted |", "|---|---|---|---|---|"]
    for r in rows:
        measured = "" if r.measured_gain is None else f"{100 * r.measured_gain:+.2f}"
        out.append(f"| {r.microbatches} | {100 * r.bubble:.1f} % | {100 * r.predicted_gain:+.2f} | {measured} | "
                   f"{realized(r.predicted_gain, r.measured_gain)} |")
    short = [r for r in rows if r.measured_gain is not None and r.predicted_gain > 0
             and r.measured_gain < r.predicted_gain]
    if short:
        out += ["", "Below 100 %: the bubble shrinks as predicted but something else grows with the microbatch count "
                "(per-microbatch overhead, smaller and less efficient matmuls), so the bubble alone overstates the gain."]
    return out


def realized(predicted: float, measured: float | None) -> str:
    """How much of the predicted gain was measured: ``18 %``, or ``opposite sign`` when it went the other way.

    (The ratio the other way round explodes when the measured gain is near zero, which is the common case.)
    """
    if measured is None or predicted == 0:
        return ""
    share = measured / predicted
    return f"{100 * share:.0f} %" if share >= 0 else f"opposite sign ({100 * share:.0f} %)"
