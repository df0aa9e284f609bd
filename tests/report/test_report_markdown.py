"""The markdown report: every section, computed from the real study records."""

from __future__ import annotations

import re

from flagopt.export import build_export, render_env_sh
from flagopt.report import report_data, render_markdown, write_report
from flagopt.report._diff import changed_text


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_report_files_and_sections(fsdp, tmp_path):
    md, page = write_report(fsdp, tmp_path)
    assert md.name == f"{fsdp.model_tag}-tuning.md" and page.name == f"{fsdp.model_tag}-tuning.html"
    text = md.read_text()
    for title in ("TL;DR", "Inventory", "Effect of the deployed env", "Leaderboard", "Negative findings", "Failures",
                  "Recommended deployment", "Appendix"):
        assert f"## {title}" in text
    command = " ".join(fsdp.baselines[0].attrs["argv"])
    assert command in text
    assert f"steps {fsdp.window[0]}-{fsdp.window[1]}" in text


def test_tldr_names_the_verdict_winner_with_its_interval(fsdp):
    rep = report_data(fsdp)
    arm = fsdp.arm_of_trial(int(fsdp.winner["trial"]))
    best = rep.tldr[0]
    assert arm.label in best and changed_text(arm.first.attrs["settings"], fsdp.space) in best
    assert f"{100 * arm.reported.lo:+.2f}" in best and f"{100 * arm.reported.hi:+.2f}" in best
    assert any(fsdp.verdict["message"] in line for line in rep.tldr)


def test_leaderboard_rows_come_from_the_study_leaderboard(pp):
    text = render_markdown(report_data(pp))
    board = section(text, "Leaderboard")
    lines = [line for line in board.splitlines() if line.startswith("| ") and "Profile" not in line]
    measured = pp.frame[pp.frame["delta_pct"].notna()]
    assert len(lines) == len(measured)  # 13 or fewer rows: one table
    for line, (_, row) in zip(lines, measured.iterrows()):
        assert line.split(" | ")[0].lstrip("| ⭐") == row["profile"]
        assert f"{row['delta_pct']:+.2f}" in line
    starred = [line for line in lines if "⭐" in line]
    assert len(starred) == 1 and pp.winner["label"] in starred[0]


def test_inventory_lists_the_deployed_flags_and_env(fsdp):
    inventory = section(render_markdown(report_data(fsdp)), "Inventory")
    base = fsdp.space["baseline"]
    for token in base["xla_flags"].split():
        assert token in inventory
    for name, value in base["env"].items():
        assert f"{name}={value}" in inventory


def test_env_effect_reports_baseline_no_env(fsdp):
    arm = next(a for a in fsdp.arms if a.kind == "baseline-no-env")
    text = report_data(fsdp).env_effect
    assert f"{100 * arm.estimate.gain:+.2f} %" in text and "baseline-no-env" in text


def test_failures_and_negative_findings(fsdp):
    rep = report_data(fsdp)
    failed = {r.attrs["failure_class"] for r in fsdp.records if r.attrs.get("failure_class")}
    assert failed == {"oom", "unknown-flag"}  # the landscape's OOM region and its removed flag
    assert {f.failure_class for f in rep.failures} == failed
    assert sum(f.count for f in rep.failures) == sum(1 for r in fsdp.records if r.status not in ("ok", "running"))
    negative = "\n".join(rep.negative)
    # the OOM and unknown-flag profiles must be skipped
    assert "ag64g" in negative and "async_old" in negative
    assert "ag1g" not in negative
    # overlap limit 2 costs 4.1 % in the fsdp64 truth, but one run's interval (about [-26, +16] %) does not show it:
    # only what the data show is a negative finding (issue 23 point 4)
    overlap2 = next(a for a in fsdp.arms if a.label == "overlap2")
    assert ("overlap2" in negative) == (overlap2.estimate.hi < 0 or overlap2.verdict == "worse")


def test_sign_flip_table_against_the_other_cell(fsdp, pp):
    rep = report_data(fsdp)
    assert rep.other_cells == (f"{pp.parallelism} ({pp.name})",)
    flips = {s.flags: s for s in rep.sign_flips}
    overlap = flips["--xla_gpu_experimental_parallel_collective_overlap_limit=2"]
    # the truth: -4.1 % under FSDP, +4.8 % under PP
    assert overlap.here_pct < 0 < overlap.other_pct and overlap.flipped in ("flip", "confirmed flip")
    assert "sign flips" in render_markdown(rep)


def test_no_sign_flip_section_without_another_cell(partial):
    assert "sign flips" not in render_markdown(report_data(partial))


def test_recommended_deployment_is_the_export(fsdp):
    rep = report_data(fsdp)
    strip = lambda s: re.sub(r"exported \S+", "", s)  # noqa: E731 (the timestamp differs)
    assert strip(rep.export_text) == strip(render_env_sh(build_export(fsdp)))
    assert rep.export_text.strip() in render_markdown(rep)


def test_appendix_lists_every_trial_with_job_and_log(fsdp):
    appendix = section(render_markdown(report_data(fsdp)), "Appendix")
    for r in fsdp.all_records:
        line = next(line for line in appendix.splitlines() if line.startswith(f"| {r.number} |"))
        assert r.attrs["job_id"] in line and r.attrs["log_path"] in line and r.status in line


def test_cli_report(cli, built, tmp_path, capsys):
    assert cli(["report", "sim-llm-partial", "--storage", built.storage, "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "sim-other-tuning.md").exists() and (tmp_path / "out" / "sim-other-tuning.html").exists()
    assert cli(["report", "missing", "--storage", built.storage, "-o", str(tmp_path / "none")]) != 0
    assert not (tmp_path / "none").exists()
