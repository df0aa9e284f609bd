"""Trial commands for the Slurm backend tests."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from flagopt.executors._launch import TrialLaunch


def step_script(steps: int, sleep_s: float) -> str:
    """A trial that prints MaxText-like step lines with the Slurm node name, ``sleep_s`` apart."""
    return (
        "import os, time\n"
        f"for i in range({steps}):\n"
        "    print(f'completed step: {i}, node={os.environ.get(\"SLURMD_NODENAME\")}', flush=True)\n"
        f"    time.sleep({sleep_s})\n"
    )


def make_launch(trial_dir: Path, code: str, *, timeout_s: float | None = 120.0) -> TrialLaunch:
    return TrialLaunch(argv=(sys.executable, "-c", code), env={}, workdir=str(trial_dir.parent),
                       trial_dir=str(trial_dir), timeout_s=timeout_s)


def sacct_field(job_id: str, field: str, within_s: float = 30.0) -> str:
    """One accounting field of an ended job, read straight from ``sacct`` (independent of the backend's parsing).

    Waits until accounting has the job's end: slurmdbd can lag a moment behind the controller.
    """
    end = time.time() + within_s
    while True:
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", f"State,{field}"], capture_output=True,
                             text=True, check=True).stdout.strip()
        state, _, value = (out.splitlines()[-1] if out else "|").partition("|")
        if state.split(" ")[0] not in ("", "PENDING", "RUNNING", "COMPLETING", "REQUEUED") or time.time() > end:
            return value
        time.sleep(0.3)
