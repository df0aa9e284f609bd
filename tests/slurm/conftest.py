"""The real local Slurm cluster for the backend tests.

The ``slurm_cluster`` fixture uses a cluster that already answers ``sinfo`` (``SLURM_CONF`` from the environment,
else ``$SLURM_LOCAL_DIR/etc/slurm.conf`` of scripts/slurm_cluster_start.sh). Otherwise, when running as root with
``FLAGOPT_START_SLURM=1``, it starts one with that script and stops it at the end; else the tests are skipped.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODES = ("node1", "node2", "node3", "node4")


def _local_conf() -> Path:
    return Path(os.environ.get("SLURM_LOCAL_DIR", "/tmp/slurm-local")) / "etc" / "slurm.conf"


def _sinfo_nodes() -> set[str] | None:
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=15)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    return set(proc.stdout.split()) if proc.returncode == 0 else None


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[set[str]]:
    """The node names of a running cluster (node1..node4 at least)."""
    patch = pytest.MonkeyPatch()
    if "SLURM_CONF" not in os.environ and _local_conf().exists():
        patch.setenv("SLURM_CONF", str(_local_conf()))  # submitit's sbatch/sacct/scancel inherit it
    nodes = _sinfo_nodes()
    started = False
    if nodes is None:
        if os.environ.get("FLAGOPT_START_SLURM") != "1" or os.geteuid() != 0:
            patch.undo()
            pytest.skip("no Slurm cluster answers `sinfo`: run `bash scripts/slurm_cluster_start.sh` and "
                        "`source /tmp/slurm-local/env.sh`, or set FLAGOPT_START_SLURM=1 as root")
        proc = subprocess.run(["bash", str(REPO / "scripts" / "slurm_cluster_start.sh")],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"scripts/slurm_cluster_start.sh failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        patch.setenv("SLURM_CONF", str(_local_conf()))
        started = True
        nodes = _sinfo_nodes() or set()
    missing = set(NODES) - nodes
    if missing:
        patch.undo()
        pytest.skip(f"the Slurm cluster lacks nodes {sorted(missing)}; these tests pin node1..node4")
    yield nodes
    if started:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm_cluster_stop.sh")], capture_output=True, timeout=120)
    patch.undo()


@pytest.fixture
def down_node(slurm_cluster: set[str]) -> Iterator[object]:
    """``down_node(name)`` sets a node DOWN with reason ``flagopt-test`` (``state="drain"``: DRAIN); every node is
    resumed afterwards.

    A test that needs the node out of service for longer than a moment drains it: the cluster runs with
    ``ReturnToService=2``, so a DOWN node comes back as soon as its slurmd registers again (in one run of `.ci/run` on
    a 2-core machine a job pinned to a node set DOWN started there within its 3 s pending deadline and finished).
    """
    downed: list[str] = []

    def down(name: str, state: str = "down") -> str:
        subprocess.run(["scontrol", "update", f"nodename={name}", f"state={state}", "reason=flagopt-test"], check=True)
        downed.append(name)
        return name

    yield down
    for name in downed:
        subprocess.run(["scontrol", "update", f"nodename={name}", "state=resume"], check=False)

