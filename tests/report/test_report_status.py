"""``flagopt status``: a finished study, and a study whose driver is running right now."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from flagopt.report import study_data, study_status
from tests.report.studies import ROOT


def test_finished_study(cli, built, pp, capsys):
    st = study_status(pp)
    assert st.counts == dict(Counter(r.status for r in pp.all_records)) and not st.running
    # the verdict's recommendation where it made one (a budget verdict's best confirmed arm), else the best arm
    assert st.best.startswith((pp.winner_arm or pp.best_arm).label + " ")
    assert cli(["status", "sim-llm-pp", "--storage", built.storage]) == 0
    out = capsys.readouterr().out
    assert "running: none" in out and pp.verdict["message"][:40] in out.replace("\n", " ")


SLOW = """
name: slow
model_tag: slow
parallelism: DP=1
command: ["{python}", "-m", "flagopt.workloads.sim", "landscape=null", "seed=1", "steps=15", "step_s=0.3"]
timeout_min: 2
"""


def test_running_study_shows_the_running_trial_and_its_step(tmp_path, cli, capsys):
    space = tmp_path / "slow.yaml"
    space.write_text(SLOW)
    storage = f"sqlite:///{tmp_path / 'slow.sqlite'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen([sys.executable, "-m", "flagopt", "run", "--space", str(space), "--storage", storage,
                               "--no-preflight", "--quiet", "--trials", "1"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        seen = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and driver.poll() is None:
            try:
                st = study_status(study_data(storage, "slow"))
            except Exception:  # the driver has not created the study yet
                st = None
            if st and st.running and st.running[0].step is not None and st.running[0].step >= 1:
                seen = st
                break
            time.sleep(0.3)
        assert seen is not None, "never saw the running trial print a step"
        run = seen.running[0]
        assert run.number == 0 and run.label == "baseline-deployed" and 1 <= run.step <= 15
        assert run.last == 14 and run.elapsed_s >= 0
        assert cli(["status", "slow", "--storage", storage]) == 0
        assert "running: trial 0 baseline-deployed" in capsys.readouterr().out
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=60)
