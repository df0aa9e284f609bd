"""The search-space file: loading, validation and the frozen model.

Example:
    >>> from flagopt.space import load_space
    >>> space = load_space("search_spaces/demo.yaml")  # doctest: +SKIP
    >>> [p.name for p in space.params]  # doctest: +SKIP
    ['ag_threshold', 'pipelined_ag']
"""

from __future__ import annotations

from flagopt.space._checks import render_value
from flagopt.space._files import read_env_file
from flagopt.space._load import check_workdir, load_space, parse_flag_tokens
from flagopt.space._model import (
    FLAG_VARIABLES, Baseline, ExecutorSpec, Metric, NoiseSpec, Param, SlurmSpec, Space, StopSpec, TrialConfig,
)

__all__ = [
    "FLAG_VARIABLES", "Baseline", "ExecutorSpec", "Metric", "NoiseSpec", "Param", "SlurmSpec", "Space", "StopSpec",
    "TrialConfig", "check_workdir", "load_space", "parse_flag_tokens", "read_env_file", "render_value",
]
