"""Render :class:`ReportData` as the markdown report (``<model_tag>-tuning.md``)."""

from __future__ import annotations

from flagopt.report._bubble import bubble_markdown
from flagopt.report._content import ReportData, Row
from flagopt.study import metric_text

_COLUMNS = "| Profile | Flags | {metric} | step (s) | Δ% vs baseline-deployed | verdict | runs |"


def cell(text: object) -> str:
    """A table cell: pipes escaped, line breaks flattened (a recorded reason can hold both)."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def code(text: str) -> str:
    """Inline code that survives any backticks inside."""
    if not text:
        return ""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def _num(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _row(r: Row) -> str:
    delta = _num(r.delta_pct, "+.2f")
    if r.ci_pct is not None:
        delta += f" [{r.ci_pct[0]:+.2f}, {r.ci_pct[1]:+.2f}]"
    name = ("⭐ " if r.winner else "") + r.profile
    return "| " + " | ".join(cell(x) for x in (
        name, r.flags if r.flags.startswith("(") else code(r.flags), metric_text(r.steady), _num(r.step_s, ".3f"), delta, r.verdict, r.runs)) + " |"


def _table(rep: ReportData, rows: tuple[Row, ...]) -> list[str]:
    head = _COLUMNS.format(metric=cell(rep.metric))
    return [head, "|" + "---|" * 7, *(_row(r) for r in rows)]


def render_markdown(rep: ReportData) -> str:
    """The whole report as one markdown document."""
    out = [f"# {rep.model_tag} tuning report", ""]
    out += [f"- **{k}**: {v}" for k, v in rep.header]
    if rep.command:
        out += ["- **Base command**:", "", "  ```", f"  {rep.command}", "  ```"]
    out += ["", "## TL;DR", "", *(f"- {line}" for line in rep.tldr), ""]

    out += ["## Inventory: what is deployed today", ""]
    if rep.inventory:
        out += ["| kind | setting | source |", "|---|---|---|"]
        out += [f"| {cell(k)} | {cell(code(s))} | {cell(src)} |" for k, s, src in rep.inventory]
    else:
        out.append("The space declares no deployed flags or env.")
    out += ["", "## Effect of the deployed env", "", rep.env_effect, ""]

    out += ["## Leaderboard", "",
            "Δ% is drift-corrected against the baseline-deployed runs interleaved through the study; "
            "the bracket is its confidence interval. "
            + ("⭐ marks the confirmed winner." if rep.winner_trial is not None else "The study has no confirmed winner yet."),
            ""]
    if rep.top:
        if rep.bottom:
            out += [f"Top {len(rep.top)}:", "", *_table(rep, rep.top), "", f"Bottom {len(rep.bottom)}:", "",
                    *_table(rep, rep.bottom)]
        else:
            out += _table(rep, rep.top)
    else:
        out.append("No configuration has completed a measured run yet.")
    if rep.board_notes:
        out += ["", *rep.board_notes]
    out += ["", "## Negative findings (skip these next time)", ""]
    if any(line.startswith("**`") for line in rep.negative):
        out += ["A setting in bold hurt wherever it was set. Sampled configurations change several settings at once, "
                "so such a pattern is a lead to test on its own, not a proof.", ""]
    out += [f"- {line}" for line in rep.negative] or ["Nothing measured hurts beyond the noise."]

    if rep.bubble:
        out += bubble_markdown(*rep.bubble)

    out += ["", "## Failures", ""]
    if rep.failures:
        out += ["| class | count | examples |", "|---|---|---|"]
        out += [f"| {cell(f.failure_class)} | {f.count} | {'<br>'.join(cell(e) for e in f.examples)} |"
                for f in rep.failures]
    else:
        out.append("No trial failed.")

    if rep.other_cells:
        out += ["", "## Same model, other parallelism: sign flips", "",
                f"Configurations measured here ({cell(rep.parallelism)}) and in {', '.join(rep.other_cells)}; "
                "a flag that helps one cell can hurt another, so the export is guarded by cell.", ""]
        if rep.sign_flips:
            out += ["| flags | here Δ% | other cell | there Δ% | sign |", "|---|---|---|---|---|"]
            for s in rep.sign_flips:
                out.append(f"| {cell(code(s.flags))} | {s.here_pct:+.2f} [{s.here_ci[0]:+.2f}, {s.here_ci[1]:+.2f}] | "
                           f"{cell(s.other_cell)} | {s.other_pct:+.2f} [{s.other_ci[0]:+.2f}, {s.other_ci[1]:+.2f}] | "
                           f"{s.flipped or 'same'} |")
        else:
            out.append("No configuration was measured in both cells.")

    out += ["", "## Recommended deployment", ""]
    if rep.export_text:
        out += [rep.export_note, "", "```bash", rep.export_text.rstrip("\n"), "```"]
    else:
        out.append(rep.export_note)

    if rep.ab:
        out += ["", "## Independent A/B (`flagopt ab`)", "",
                "The deployed job (A) and each patch, interleaved in rounds (A B / B A, or a Latin square over "
                "several patches) so drift cancels; the gain is over the per-round ratios, with a 95 % t-interval. "
                "It agrees with the study's claim when either contains the other's gain.", "", *rep.ab]

    out += ["", "## Appendix: every trial", "", "| trial | kind | label | job id | status | Δ% | log |",
            "|---|---|---|---|---|---|---|"]
    for a in rep.appendix:
        delta = a["delta_pct"]
        shown = f"{delta:+.2f}" if isinstance(delta, (int, float)) else ""
        out.append("| " + " | ".join(cell(x) for x in (a["trial"], a["kind"], a["label"], a["job_id"], a["status"],
                                                       shown, code(a["log_path"]))) + " |")
    return "\n".join(out) + "\n"
