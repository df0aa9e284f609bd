"""Executors run rendered trials: ``local`` (the default), ``slurm`` (an sbatch job per trial) and ``slurm-steps``
(an srun step per trial inside an allocation).

Example:
    >>> from flagopt.executors import TrialLaunch
    >>> TrialLaunch(argv=("true",), env={}, workdir=".", trial_dir="/tmp/t").argv
    ('true',)
"""

from __future__ import annotations

from flagopt.executors._base import BaseExecutor, JobResult, JobStatus, TrialJob
from flagopt.executors._launch import (RunOutcome, TrialLaunch, child_environment, log_path_for, run_trial,
                                      stopped_from_outside)
from flagopt.executors._local import LocalExecutor
from flagopt.executors._slurm import SlurmExecutor, SlurmSettings, SlurmTrialJob
from flagopt.executors._steps import SlurmStepsExecutor, require_allocation
from flagopt.executors._slurm_query import check_pinned_nodes, check_slots, node_states

__all__ = [
    "BaseExecutor",
    "JobResult",
    "JobStatus",
    "LocalExecutor",
    "RunOutcome",
    "SlurmExecutor",
    "SlurmSettings",
    "SlurmStepsExecutor",
    "SlurmTrialJob",
    "TrialJob",
    "child_environment",
    "TrialLaunch",
    "check_pinned_nodes",
    "check_slots",
    "log_path_for",
    "node_states",
    "require_allocation",
    "run_trial",
    "stopped_from_outside",
]
