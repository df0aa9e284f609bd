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
    arm = fsdp.arm_of_trial(int(fsdp.winner["trial"]))
    assert arm.claim is not None and arm.claim.gain != pytest.approx(arm.estimate.gain)
    out = tmp_path / "w.json"
    assert cli(["export", "sim-llm-fsdp", "--storage", built.storage, "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["gain"] == pytest.approx(fsdp.winner["gain"]) == pytest.approx(arm.claim.gain)
    assert doc["ci"] == pytest.approx(fsdp.winner["ci"])
    assert (doc["fresh_runs"], doc["runs"]) == (arm.claim.n, arm.n)
    assert doc["all_runs_gain"] == pytest.approx(arm.estimate.gain)
    headline = render_env_sh(build_export(fsdp)).splitlines()[2]
    assert f"{100 * arm.claim.gain:+.2f} %" in headline and f"over {arm.claim.n} fresh runs ({arm.n} in all)" in headline
    report = tmp_path / "report"
    assert cli(["report", "sim-llm-fsdp", "--storage", built.storage, "-o", str(report)]) == 0
    tldr = next(line for md in report.glob("*.md") for line in md.read_text().splitlines() if "Best recipe" in line)
    assert f"Δ {100 * arm.claim.gain:+.2f} %" in tldr and f"{arm.claim.n} fresh runs" in tldr


def test_xla_flags_format_is_one_line_and_warns_about_what_it_leaves_out(cli, built, pp, capsys):
    assert cli(["export", "sim-llm-pp", "--storage", built.storage, "--format", "xla-flags"]) == 0
    captured = capsys.readouterr()
    # No confirmed winner clears this study's bars, so the export falls back to the best arm, labelled unconfirmed.
    chosen = pp.record(int(pp.winner["trial"])) if pp.winner else pp.best_arm.first
    settings = chosen.attrs["settings"]
    assert captured.out.strip().split() == [f"--{k}={v}" for k, v in settings["xla"].items()]
    assert all(name in captured.err for name in settings["env"])  # env vars cannot ride in XLA_FLAGS


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
