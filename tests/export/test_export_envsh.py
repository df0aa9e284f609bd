"""env.sh: bash-clean, guarded, and sourcing it onto the deployed environment gives exactly the trial's environment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from flagopt.export import baseline_for, build_export, render_env_sh
from flagopt.report import StudyData

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")
# bash sets these itself; they say nothing about the patch.
SHELL_OWN = {"PWD", "SHLVL", "_", "OLDPWD"}


def source(patch: Path, start: dict[str, str], cwd: Path, script: str = "") -> tuple[dict[str, str], str]:
    """Source ``patch`` in a fresh bash whose environment is exactly ``start``; return its environment and stderr."""
    done = subprocess.run([BASH, "--noprofile", "--norc", "-c", f'source "$1" && {script or "true"} && env -0', "bash",
                           str(patch)], env=start, cwd=cwd, capture_output=True, check=True)
    out = done.stdout.decode()
    env_blob = out[out.find("\n") + 1:] if script else out
    pairs = [item.split("=", 1) for item in env_blob.split("\0") if item]
    return {k: v for k, v in pairs if k not in SHELL_OWN}, done.stderr.decode()


def deployed_env(data: StudyData, number: int) -> dict[str, str]:
    """What a job inherits where the deployed state is set: the baseline-deployed run's recorded environment."""
    base = baseline_for(data.record(number), data.all_records)
    env = {k: v for k, v in base.attrs["env"].items() if v is not None}
    return {"PATH": "/usr/bin:/bin", **env}


def expected_env(start: dict[str, str], trial_env: dict[str, str | None]) -> dict[str, str]:
    out = dict(start)
    for name, value in trial_env.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def ok_trials(data: StudyData) -> list[int]:
    return [r.number for r in data.records if r.ok]


@pytest.mark.parametrize("study", ["fsdp", "pp"])
def test_sourcing_every_trial_reproduces_its_recorded_environment(study, request, tmp_path):
    data = request.getfixturevalue(study)
    checked = 0
    for number in ok_trials(data):
        patch = tmp_path / f"{number}.env.sh"
        patch.write_text(render_env_sh(build_export(data, number)))
        subprocess.run([BASH, "-n", str(patch)], check=True)
        start = deployed_env(data, number)
        got, _ = source(patch, start, tmp_path)
        assert got == expected_env(start, data.record(number).attrs["env"]), f"trial {number}"
        checked += 1
    assert checked >= 6  # every ok trial: controls, the profiles that ran and the winner's repeats


def test_hostile_looking_values_survive_quoting(fsdp, tmp_path):
    from tests.report.studies import HOSTILE_ENV, HOSTILE_FLAG
    hostile = next(r for r in fsdp.records if r.label == "hostile" and r.ok)
    patch = tmp_path / "hostile.env.sh"
    patch.write_text(render_env_sh(build_export(fsdp, hostile.number)))
    got, _ = source(patch, deployed_env(fsdp, hostile.number), tmp_path)
    assert got["NCCL_HOSTILE"] == HOSTILE_ENV
    assert got["XLA_FLAGS"].split()[-1] == f"--xla_gpu_hostile_value={HOSTILE_FLAG}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.env.sh"]  # nothing globbed, nothing created


def test_baseline_no_env_export_unsets_what_the_image_does_not_set(fsdp, tmp_path):
    no_env = next(r for r in fsdp.records if r.kind == "baseline-no-env")
    removed = [k for k, v in no_env.attrs["env"].items() if v is None]
    assert removed, "the fsdp space restores NCCL_PROTO (no image default) by unsetting it"
    patch = tmp_path / "no-env.env.sh"
    patch.write_text(render_env_sh(build_export(fsdp, no_env.number)))
    got, _ = source(patch, deployed_env(fsdp, no_env.number), tmp_path)
    assert not set(removed) & set(got)
    assert all(f"unset {name}" in patch.read_text() for name in removed)


def test_guard_applies_only_to_the_tuned_cell(fsdp, tmp_path):
    ex = build_export(fsdp)
    patch = tmp_path / "winner.env.sh"
    patch.write_text(render_env_sh(ex))
    number = ex.choice.record.number
    start = deployed_env(fsdp, number)
    other, err = source(patch, {**start, "FLAGOPT_PARALLELISM": "PP=4"}, tmp_path)
    assert other == {**start, "FLAGOPT_PARALLELISM": "PP=4"}
    assert "not applied" in err and fsdp.parallelism in err
    same, _ = source(patch, {**start, "FLAGOPT_PARALLELISM": fsdp.parallelism}, tmp_path)
    assert same == {**expected_env(start, ex.choice.record.attrs["env"]), "FLAGOPT_PARALLELISM": fsdp.parallelism}


def test_guard_off_when_the_space_says_so(partial, tmp_path):
    text = render_env_sh(build_export(partial, partial.best_arm.first.number))
    assert "if [[" not in text and "_flagopt_cell" not in text


def test_workload_args_are_a_separate_array_that_rebuilds_the_trial_argv(pp, tmp_path):
    mb = next(r for r in pp.records if r.label == "mb32" and r.ok)
    patch = tmp_path / "mb.env.sh"
    patch.write_text(render_env_sh(build_export(pp, mb.number)))
    start = deployed_env(pp, mb.number)
    done = subprocess.run([BASH, "--noprofile", "--norc", "-c", 'source "$1"; printf "%s\\n" "${FLAGOPT_WORKLOAD_ARGS[@]}"',
                           "bash", str(patch)], env=start, capture_output=True, text=True, check=True)
    args = done.stdout.split()
    base_argv = baseline_for(mb, pp.all_records).attrs["argv"]
    override = dict(a.split("=", 1) for a in args)
    rebuilt = [f"{a.split('=', 1)[0]}={override[a.split('=', 1)[0]]}" if "=" in a and a.split("=", 1)[0] in override
               else a for a in base_argv]
    assert rebuilt == mb.attrs["argv"]
    assert "FLAGOPT_WORKLOAD_ARGS" not in source(patch, start, tmp_path)[0]  # a shell array, not exported


def test_confirmed_and_unconfirmed_are_labelled(fsdp, partial, tmp_path):
    confirmed = render_env_sh(build_export(fsdp))
    assert "# CONFIRMED" in confirmed and "UNCONFIRMED" not in confirmed
    assert f"trial {fsdp.winner['trial']} " in confirmed
    ex = build_export(partial, partial.best_arm.first.number)  # asked for by number: the study confirmed none
    assert not ex.choice.confirmed and ex.warnings
    patch = tmp_path / "partial.env.sh"
    patch.write_text(render_env_sh(ex))
    assert "# UNCONFIRMED" in patch.read_text()
    _, err = source(patch, deployed_env(partial, ex.choice.record.number), tmp_path)
    assert "UNCONFIRMED" in err


@pytest.mark.skipif(shutil.which("dash") is None and shutil.which("sh") is None, reason="no POSIX sh")
def test_sourced_by_posix_sh_says_it_needs_bash(fsdp, tmp_path):
    ex = build_export(fsdp)
    patch = tmp_path / "env.sh"
    patch.write_text(render_env_sh(ex))
    sh = shutil.which("dash") or shutil.which("sh")
    start = deployed_env(fsdp, ex.choice.record.number)
    for script in ('. ./env.sh; echo "status $?"', "./env.sh"):
        if script == "./env.sh":
            patch.chmod(0o755)
            done = subprocess.run([sh, str(patch)], env=start, cwd=tmp_path, capture_output=True, text=True)
            assert done.returncode == 1
        else:
            done = subprocess.run([sh, "-c", script], env=start, cwd=tmp_path, capture_output=True, text=True)
            assert done.stdout.strip() == "status 1"
        assert done.stderr.startswith("flagopt: this patch needs bash: source it from bash"), done.stderr
        assert "not applied" not in done.stderr and "[[" not in done.stderr
    got, err = source(patch, start, tmp_path)  # bash still applies it
    assert "needs bash" not in err and got == expected_env(start, ex.choice.record.attrs["env"])
