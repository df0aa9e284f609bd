"""Show the benchmark: rich tables for the terminal and the markdown write-up (``docs/benchmark-decisions.md``).

The write-up is regenerated on every run; hand-written analysis between ``<!-- notes -->`` and
``<!-- /notes -->`` in an existing file is carried over, so the explanation survives a re-run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from benchmarks._metrics import Summary, TargetCheck

COLUMNS = ("landscape", "strategy", "seeds", "true best", "runs (median [IQR])", "run-hours (median [IQR])",
           "controls", "within 1 %", "regret mean / median", "false winner", "claims (>= +5 %)", "coverage",
           "claimed - true", "repeated failures", "flagopt verdicts")
_LEFT = ("landscape", "strategy", "flagopt verdicts")
_NOTES = re.compile(r"<!-- notes -->.*?<!-- /notes -->", re.S)

STRATEGY_TEXT = (
    "* **flagopt** — the real `StudyRunner` (default sampler and noise settings, stop rules win 0.05, "
    "null_gain 0.02, max_null 25, max_trials as below) on `SimExecutor`: every run writes the simulated job's MaxText log and goes "
    "through the real log parser, failure classifier, retry policy, drift correction and planner. Choice: the "
    "verdict's winner, else the deployed baseline; claim and interval: the verdict's.",
    "* **manual** — two baseline runs, each catalog profile the space offers once (h200x2-measured), one-factor "
    "waves (each grid value of each param alone, one run each; an "
    "infrastructure failure is launched once more), then the per-param best values combined; the pick is the best "
    "observed run, the claim its throughput over the baseline pair.",
    "* **flagopt-eq** — flagopt as above with `stop.max_trials` set to the manual protocol's launches on the same "
    "seed: what flagopt decides on the engineer's budget (its last runs confirm the best measured; a budget "
    "verdict's pick). **flagopt-1.5x**: the same with one and a half times the manual protocol's launches.",
    "* **flagopt-told** — flagopt told the answer: its space is the landscape's true best configuration as its one "
    "profile and no params, so its runs only confirm it (and try its subsets). What confirmation alone costs in runs "
    "and yields in win verdicts: a bound for any study that must first find the winner (skipped where the true best "
    "is the deployed job).",
    "* **manual-x3** — the same protocol by a careful engineer: every run (baselines included) made three times in a "
    "row and averaged; it shows what the one-factor protocol buys with three times the runs.",
    "* **random** — one baseline run, then random configurations; as many launches as flagopt used on that seed; "
    "best observed.",
    "* **tpe** — one baseline run, then plain Optuna `TPESampler` on raw tokens/s; same budget; best observed.",
    "* **tpe-repeats** — TPE told drift-corrected gains (over the mean of the last two controls), a baseline "
    "control every 4th launch, each proposal that ranks in the top 3 re-run to 3 runs; the pick is the best "
    "drift-corrected mean (level interpolated between controls) among the most-repeated arms, with a 95 % "
    "t-interval; same budget.",
    "* **skopt** — scikit-optimize `Optimizer(base_estimator=\"ET\")` (extra-trees surrogate, 8 random initial "
    "points) ask/tell on raw tokens/s, a failed run told the worst value seen; same budget; best observed.",
    "",
    "Every strategy sees the same drift (by launch index), run noise and infrastructure failures, each on its own "
    "random stream. A plain strategy's *claim* is its best observation over its observed baseline.",
)
METRIC_TEXT = (
    "runs: launches until the decision. run-hours: their simulated durations summed (startup, compilation, steps; a "
    "hang until the 10-minute watchdog). controls: baseline runs / all launches, median over seeds (flagopt: "
    "records of kind baseline-deployed and baseline-no-env). within 1 %: the choice's true throughput is >= 99 % "
    "of the true best's. regret: true best gain minus the choice's true gain. false winner: flagopt recommends a "
    "configuration whose true gain is < 2 %; the others claim >= 2 % for one. claims: studies that recommend "
    "something (>= +5 %: share of seeds claiming at least +5 %). coverage: share of claims with an interval whose "
    "95 % interval contains the true gain. claimed - true: mean over claims. repeated failures: after the first 10 "
    "non-control runs, the share of non-control runs that failed for a reason an earlier failed run showed (same "
    "OOM rule or unknown flag; infrastructure failures never count), pooled over seeds."
)


def _opt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def rows(summaries: Sequence[Summary]) -> list[tuple[str, ...]]:
    """Table cells, one row per summary (percentages of the baseline for gains and regret)."""
    out = []
    for s in summaries:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items())) or "-"
        hours = (s.seconds_median / 3600, s.seconds_q25 / 3600, s.seconds_q75 / 3600)
        coverage = "-" if s.coverage is None else f"{s.coverage:.0%} of {s.coverage_n}"
        error = "-" if s.claim_error_mean is None else f"{100 * s.claim_error_mean:+.2f} pp"
        repeated, counted = s.repeated_failures
        rep = "-" if not counted else f"{repeated / counted:.0%} ({repeated}/{counted})"
        out.append((s.landscape, s.strategy, str(s.seeds), f"{100 * s.best_gain:+.1f} % ({s.kind})",
                    f"{s.runs_median:.4g} [{s.runs_q25:.4g}-{s.runs_q75:.4g}]",
                    f"{hours[0]:.1f} [{hours[1]:.1f}-{hours[2]:.1f}]", _opt_pct(s.controls_median),
                    f"{s.within_1pct:.0%}", f"{100 * s.regret_mean:.2f} / {100 * s.regret_median:.2f} pp",
                    f"{s.false_winner:.0%}", f"{s.claims} ({s.claims_win:.0%})", coverage, error, rep, verdicts))
    return out


def sectioned_table(title: str, columns: Sequence[str], left: Sequence[str], body: Sequence[Sequence[str]]) -> Table:
    """A rich table whose rows are grouped into sections by their first cell (the landscape)."""
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col, justify="left" if col in left else "right")
    last = None
    for row in body:
        if last is not None and row[0] != last:
            table.add_section()
        last = row[0]
        table.add_row(*row)
    return table


def _results_table(title: str, summaries: Sequence[Summary]) -> Table:
    return sectioned_table(title, COLUMNS, _LEFT, rows(summaries))


def _targets_table(title: str, checks: Sequence[TargetCheck]) -> Table:
    targets = Table(title=title)
    for col in ("target", "wanted", "measured", "met"):
        targets.add_column(col)
    for c in checks:
        targets.add_row(c.name, c.target, c.measured, "[green]yes[/green]" if c.met else "[red]no[/red]")
    return targets


#: What the named landscapes are called in the tables when no landscapes file of one's own is given.
SHIPPED = "shipped landscapes"


def rich_tables(shipped: Sequence[Summary], held_out: Sequence[Summary], checks: Sequence[TargetCheck],
                held_checks: Sequence[TargetCheck], *, source: str = SHIPPED) -> list[Table]:
    """The terminal view: results and targets, named landscapes (``source``: the shipped ones, or a file's) and
    held-out families apart."""
    out = []
    if shipped:
        out.append(_results_table(f"Decisions on the {source}", shipped))
    if held_out:
        out.append(_results_table("Decisions on held-out random landscapes (one per seed)", held_out))
    if checks:
        out.append(_targets_table(f"Targets (flagopt, {source})", checks))
    if held_checks:
        out.append(_targets_table("Targets (flagopt, held-out families)", held_checks))
    return out


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return "\n".join(lines)


def _targets_md(checks: Sequence[TargetCheck]) -> str:
    return markdown_table(("target", "wanted", "measured", "met"),
                          [(c.name, c.target, c.measured, "yes" if c.met else "**no**") for c in checks])


def kept_notes(previous: str) -> str:
    """The hand-written notes section of a previous write-up (an empty one when there is none).

    Example:
        >>> kept_notes("old\\n<!-- notes -->\\nwhy\\n<!-- /notes -->\\n")
        '<!-- notes -->\\nwhy\\n<!-- /notes -->'
    """
    kept = _NOTES.search(previous)
    return kept.group(0) if kept else "<!-- notes -->\n<!-- /notes -->"


def markdown(shipped: Sequence[Summary], held_out: Sequence[Summary], checks: Sequence[TargetCheck],
             held_checks: Sequence[TargetCheck], meta: dict[str, Any], landscapes: dict[str, str],
             notes_run: Sequence[str] = (), previous: str = "", *, source: str = SHIPPED,
             file: str = "flagopt/workloads/landscapes.yaml") -> str:
    """The write-up: how it was run, the tables, the targets, and the notes kept from ``previous``; the named
    landscapes are ``source`` (the shipped ones, or those of ``file``)."""
    kept = _NOTES.search(previous)
    notes = kept.group(0) if kept else "<!-- notes -->\n<!-- /notes -->"
    parts = [
        "# Benchmark: flagopt's noise-aware decisions against the usual ways of choosing flags",
        "Generated by `benchmarks/decisions.py` (see `benchmarks/README.md`); the numbers below are rewritten on "
        "every run, the notes section is kept.",
        "## How it was run",
        markdown_table(("", ""), [
            ("command", f"`{meta['command']}`"), ("date", meta["date"]), ("machine", meta["machine"]),
            ("wall time", meta["wall"]), ("flagopt commit", meta["commit"]), ("versions", meta["versions"]),
            *((("skipped", n) for n in notes_run)),
        ]),
        "## Landscapes",
        markdown_table(("landscape", f"truth model ({file})"), list(landscapes.items())),
        "Held-out landscapes (not shipped; `benchmarks/_random_landscapes.py`, one per seed): `rand-win` (true best "
        ">= +6 %), `rand-below` (true best +2.5..+4.5 %), `rand-null` (every effect below 0.3 %); `rand-recipe` (a "
        "rand-win draw with a recipe profile, settings only it sets, and a communication pool); a family named "
        "`...-flaky`: the same landscapes on flaky infrastructure (the `flaky` landscape's failure rates per launch).",
        "## Strategies",
        "\n".join(STRATEGY_TEXT),
    ]
    if shipped:
        parts += [f"## Results: {source}", markdown_table(COLUMNS, rows(shipped))]
    if held_out:
        parts += ["## Results: held-out random landscapes", markdown_table(COLUMNS, rows(held_out))]
    parts.append(METRIC_TEXT)
    if checks:
        parts += ["## Targets (issue 25)", _targets_md(checks)]
    if held_checks:
        parts += ["### Targets on the held-out families", _targets_md(held_checks)]
    parts += ["## Notes", notes, ""]
    return "\n\n".join(parts)


def write_markdown(path: Path, text_of: Callable[[str], str]) -> None:
    """Write the file, passing the previous content (for its notes) to ``text_of``."""
    previous = path.read_text() if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_of(previous))
