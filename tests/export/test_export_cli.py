"""``flagopt export``: formats, errors (one line, non-zero, no file), and a study with hostile recorded values."""

from __future__ import annotations

import json
import shutil
import subprocess

import optuna
import pytest

from flagopt.export import build_export, render_env_sh
from flagopt.report import study_data

BASH = shutil.which("bash")


def test_json_matches_the_patch_and_the_trial(cli, built, fsdp, tmp_path, capsys):
    out = tmp_path / "w.json"
    assert cli(["export", "sim-llm-fsdp", "--storage", built.storage, "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    winner = fsdp.record(int(fsdp.winner["trial"]))
    assert doc["trial"] == winner.number and doc["confirmed"] is True
    assert doc["env"] == winner.attrs["env"]
    base = fsdp.baselines[0].attrs["env"]["XLA_FLAGS"]
    assert base + " " + " ".join(doc["append"]["XLA_FLAGS"]) == winner.attrs["env"]["XLA_FLAGS"]
    assert doc["guard"] == {"variable": "FLAGOPT_PARALLELISM", "value": fsdp.parallelism}
    lo, hi = doc["ci"]
    assert lo <= doc["gain"] <= hi


def test_the_gain_a_user_reads_is_the_fresh_runs_one_the_verdict_claims(cli, built, fsdp, tmp_path):
    # The selecting first run is high by selection (statistics.md §11): the export and the report must say what the
    # verdict says, not the all-run estimate that the leaderboard ranks by.
    # A win's claim comes from the runs after its choice where it has them (statistics.md §11), else the fresh runs.
    arm = fsdp.arm_of_trial(int(fsdp.winner["trial"]))
    claim = arm.reported
    assert arm.claim is not None and claim in (arm.settled, arm.claim) and claim.gain != pytest.approx(arm.estimate.gain)
    out = tmp_path / "w.json"
    assert cli(["export", "sim-llm-fsdp", "--storage", built.storage, "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["gain"] == pytest.approx(fsdp.winner["gain"]) == pytest.approx(claim.gain)
    assert doc["ci"] == pytest.approx(fsdp.winner["ci"])
    assert (doc["fresh_runs"], doc["runs"]) == (claim.n, arm.n)
    assert doc["all_runs_gain"] == pytest.approx(arm.estimate.gain)
    headline = render_env_sh(build_export(fsdp)).splitlines()[2]
    assert f"{100 * claim.gain:+.2f} %" in headline and f"over {claim.n} fresh runs ({arm.n} in all)" in headline
    report = tmp_path / "report"
    assert cli(["report", "sim-llm-fsdp", "--storage", built.storage, "-o", str(report)]) == 0
    tldr = next(line for md in report.glob("*.md") for line in md.read_text().splitlines() if "Best recipe" in line)
    assert f"Δ {100 * claim.gain:+.2f} %" in tldr and f"{claim.n} fresh run" in tldr


def test_xla_flags_format_is_one_line_and_warns_about_what_it_leaves_out(cli, built, pp, capsys):
    # No confirmed winner clears this study's bars: its best estimate is exported only when asked for by number.
    chosen = pp.record(int(pp.winner["trial"])) if pp.winner else pp.best_arm.first
    assert cli(["export", "sim-llm-pp", "--storage", built.storage, "--format", "xla-flags",
                "--trial", str(chosen.number)]) == 0
    captured = capsys.readouterr()
    settings = chosen.attrs["settings"]
    assert captured.out.strip().split() == [f"--{k}={v}" for k, v in settings["xla"].items()]
    assert all(name in captured.err for name in settings["env"])  # env vars cannot ride in XLA_FLAGS


@pytest.mark.parametrize("fmt", ["env.sh", "json", "xla-flags"])
def test_without_a_confirmed_winner_export_says_keep_the_deployed_job(cli, built, partial, tmp_path, capsys, fmt):
    # It wrote the best estimate (once a -9.55 % arm) as a patch and exited 0.
    assert partial.winner is None
    out = tmp_path / "patch"
    assert cli(["export", "sim-llm-partial", "--storage", built.storage, "--format", fmt, "-o", str(out)]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    best = partial.best_arm
    assert line.startswith("flagopt: error: sim-llm-partial: no confirmed winner, so nothing to deploy: keep the "
                           "deployed job (the study has no verdict yet).")
    assert f"export sim-llm-partial --trial {best.first.number}" in line and "UNCONFIRMED" in line
    assert not out.exists() and captured.out == ""
    # asked for by number, the same configuration is exported, marked unconfirmed
    assert cli(["export", "sim-llm-partial", "--storage", built.storage, "--format", fmt, "-o", str(out),
                "--trial", str(best.first.number)]) == 0
    assert "UNCONFIRMED" in capsys.readouterr().err and out.exists()


def test_the_report_recommends_keeping_the_deployed_job(cli, built, partial, tmp_path):
    out = tmp_path / "report"
    assert cli(["report", "sim-llm-partial", "--storage", built.storage, "-o", str(out)]) == 0
    text = next(out.glob("*.md")).read_text()
    section = text[text.index("## Recommended deployment"):text.index("## Appendix")]
    assert "**Keep the deployed job.** No confirmed winner, so nothing to deploy" in section
    assert "```bash" not in section


def _numerics_study(storage: str, *, winner: bool) -> None:
    """A study whose second configuration ran faster but with a final loss the numerics guard flagged."""
    study = optuna.create_study(study_name="drifty", storage=storage)
    study.set_user_attr("flagopt.space", {"export": {"guard": False}})
    flag = "final loss 3.1 differs from the baseline's 2.5 by 24.0% (> 5%); the speed-up may change the numerics"
    runs = [("baseline-deployed", "k0", 100.0, {}), ("profile", "k1", 112.0, {"numerics_flag": flag}),
            ("baseline-deployed", "k0", 100.5, {}), ("profile", "k1", 111.5, {"numerics_flag": flag}),
            ("baseline-deployed", "k0", 99.8, {})]
    for number, (kind, key, steady, extra) in enumerate(runs):
        study.add_trial(optuna.trial.create_trial(value=0.0, user_attrs={
            "kind": kind, "profile": "bs32" if kind == "profile" else kind, "config_key": key, "status": "ok",
            "steady": steady, "started_at": float(number), "settings": {"args": {"batch": 32}} if key == "k1" else {},
            "env": {"XLA_FLAGS": ""}, **extra}))
    if winner:
        study.set_user_attr("flagopt.verdict", {"reason": "win", "message": "bs32 wins", "winner": {
            "trial": 1, "config_key": "k1"}})


@pytest.mark.parametrize("winner", [False, True], ids=["asked-for", "confirmed"])
def test_a_numerics_flagged_configuration_is_never_exported_silently(cli, tmp_path, capsys, winner):
    storage = f"sqlite:///{tmp_path / 'n.sqlite'}"
    _numerics_study(storage, winner=winner)
    out = tmp_path / "patch.env.sh"
    argv = ["export", "drifty", "--storage", storage, "-o", str(out)] + ([] if winner else ["--trial", "1"])
    assert cli(argv) == 0
    err = capsys.readouterr().err
    assert "flagopt: NUMERICS FLAGGED: final loss 3.1 differs from the baseline's 2.5" in err
    text = out.read_text()
    assert "# NUMERICS FLAGGED: final loss 3.1" in text
    assert "echo 'flagopt: WARNING: NUMERICS FLAGGED: final loss 3.1" in text  # said again when sourced
    report = tmp_path / "report"
    assert cli(["report", "drifty", "--storage", storage, "-o", str(report)]) == 0
    section = next(report.glob("*.md")).read_text().split("## Recommended deployment")[1].split("## Appendix")[0]
    assert ("**NUMERICS FLAGGED: final loss 3.1" if winner else "Its NUMERICS were FLAGGED: final loss 3.1") in section


@pytest.mark.parametrize("argv", [["export", "no-such-study"], ["export", "sim-llm-fsdp", "--trial", "999"]])
def test_errors_are_one_line_nonzero_and_write_nothing(cli, built, tmp_path, capsys, argv):
    out = tmp_path / "patch.env.sh"
    assert cli([*argv, "--storage", built.storage, "-o", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flagopt: error:")
    assert not out.exists()


def _hostile_study(storage: str):
    """A study whose recorded values could break a naive exporter (quotes, $(...), backticks, newlines)."""
    study = optuna.create_study(study_name="hostile", storage=storage)
    study.set_user_attr("model_tag", "tag\ntouch PWNED_TAG")
    study.set_user_attr("parallelism", "TP=2 'x' $(touch PWNED_CELL)")
    study.set_user_attr("flagopt.space", {"export": {"guard": True}})
    base_env = {"XLA_FLAGS": "--xla_a=1", "KEEP": "same", "GONE": "x"}
    evil = {"XLA_FLAGS": "--xla_a=1 --xla_b=$(touch PWNED_FLAG) --xla_c=`touch PWNED_TICK`",
            "EVIL": "'; touch PWNED_QUOTE; echo '", "NL": "line1\nline2 \"q\" \\ $HOME", "KEEP": "same", "GONE": None}
    for number, (kind, env) in enumerate((("baseline-deployed", base_env), ("profile", evil))):
        study.add_trial(optuna.trial.create_trial(value=0.0, user_attrs={
            "kind": kind, "profile": kind if kind != "profile" else "evil\nprofile", "config_key": f"k{number}",
            "status": "ok", "steady": 100.0, "env": env, "settings": {}, "started_at": float(number),
            "host": "h$(touch PWNED_HOST)", "run_info": {"jax_version": "0.4\n touch PWNED_INFO"}}))
    return base_env, evil


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_hostile_recorded_values_are_quoted_and_exact(tmp_path):
    storage = f"sqlite:///{tmp_path / 'h.sqlite'}"
    base_env, evil = _hostile_study(storage)
    text = render_env_sh(build_export(study_data(storage, "hostile"), trial=1))
    patch = tmp_path / "evil.env.sh"
    patch.write_text(text)
    work = tmp_path / "cwd"
    work.mkdir()
    subprocess.run([BASH, "-n", str(patch)], check=True)
    start = {"PATH": "/usr/bin:/bin", **{k: v for k, v in base_env.items() if v is not None}}
    done = subprocess.run([BASH, "--noprofile", "--norc", "-c", 'source "$1" && env -0', "bash", str(patch)],
                          env=start, cwd=work, capture_output=True, check=True)
    got = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if item)
    for name, value in evil.items():
        assert got.get(name) == value, name
    assert list(work.iterdir()) == [] and not list(tmp_path.glob("PWNED*"))
