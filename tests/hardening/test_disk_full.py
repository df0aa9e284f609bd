"""Issue 22 D7: a full disk under the trial folders stops the study with one line; the configuration that was
running is not recorded as failed, spends no budget, and runs again when there is room."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

import pytest

from flagopt.study import history, load_study
from tests.hardening.conftest import one_line, run


@pytest.fixture
def small_disk(tmp_path):
    folder = tmp_path / "artifacts"
    folder.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a small tmpfs")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_trial_disk_stops_the_study_and_never_blames_the_configuration(space, tmp_path, small_disk, capsys,
                                                                             monkeypatch):
    # a job whose log (2 MB of output before its steps) does not fit on the trial folders' 1 MiB disk
    chatty = tmp_path / "chatty.py"
    chatty.write_text(textwrap.dedent("""\
        import runpy, sys
        for _ in range(20000):
            print("x" * 100)
        sys.argv = ["faulty", *sys.argv[1:]]
        runpy.run_module("flagopt.workloads.faulty", run_name="__main__")
    """))
    space.write_text(space.read_text().replace('"-m", "flagopt.workloads.faulty"', f'"{chatty}"'))
    monkeypatch.setenv("FLAGOPT_ARTIFACTS", str(small_disk))
    storage = f"sqlite:///{tmp_path}/studies/flagopt.db"
    assert run(space, storage, "--trials", "1") == 1
    err = one_line(capsys)
    assert "trial 0's folder could not be written (No space left on device" in err and "runs again" in err
    records = history(load_study(storage, "s0"))
    assert [r.status for r in records] == ["cancelled"] and records[0].stopped_with_driver  # not "failed crash"
    # room again: the same configuration runs again and is measured
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    assert run(space, storage, "--trials", "1") == 0
    records = history(load_study(storage, "s0"))
    assert [r.status for r in records] == ["cancelled", "ok"] and records[1].kind == records[0].kind
