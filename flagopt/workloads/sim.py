"""A simulated cluster job with a known truth: for benchmarks of the search and end-to-end tests of the tool.

``python -m flagopt.workloads.sim landscape=<name> seed=<n> steps=15 step_s=0.0 [key=value ...]`` reads
``XLA_FLAGS`` (a repeated flag resolves last-wins, like XLA), the landscape's environment variables
(``NCCL_PROTO``...) and ``key=value`` workload arguments (``num_pipeline_microbatches=16``), evaluates the
landscape's truth model and prints MaxText step lines (step 0 includes compilation). A flag the landscape lists as
unknown aborts at start with XLA's real message; an OOM region prints the real ``RESOURCE_EXHAUSTED`` block and
exits 1. Drift follows the launch index, counted across processes in the file named by ``FLAGOPT_SIM_STATE``
(``launch=<i>`` overrides it).

A landscape with a ``flaky:`` section also fails for reasons no setting causes, each launch independently with the
given probability, drawn from ``(seed, launch)``: ``nccl_init`` (NCCL bootstrap failure at the first collective,
exit 1), ``coordination_timeout`` (the coordination service's heartbeat timeout, then XLA's abort), ``hang`` (the
job stops printing steps after a few and sleeps until the runner's hang watchdog kills it) and ``sigterm_after``
(every step printed, then the job dies of SIGTERM at teardown: exit 143).

Landscapes come from ``landscapes.yaml`` next to this module, or from another file of the same schema named by the
reserved argument ``landscapes=<path>`` or the environment variable ``FLAGOPT_SIM_LANDSCAPES`` (the benchmark's
held-out random landscapes are written that way).

The truth models are data (``landscapes.yaml``); the same model is usable in-process, so a benchmark can sample
thousands of runs without processes.

Example:
    >>> land = load_landscape("fsdp64")
    >>> round(land.true_gain({"xla_gpu_all_gather_combine_threshold_bytes": 2**30}), 3)
    0.116
"""

from __future__ import annotations

import fcntl
import math
import os
import resource
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flagopt.workloads import _emit
from flagopt.workloads._landscape import (  # the landscape model, re-exported: callers import it from here
    DEFAULT_HANG_S, FLAKY_KINDS, HEARTBEAT_TIMEOUT_S, LANDSCAPES, LANDSCAPES_ENV, STARTUP_S, TARGETS, Best, Landscape,
    SimParam, SimulatedFailure, Value, _RESERVED,
)
from flagopt.workloads._landscapes_file import landscape_from_data, landscape_names, landscapes_path, load_landscape

__all__ = [
    "DEFAULT_HANG_S", "FLAKY_KINDS", "HEARTBEAT_TIMEOUT_S", "LANDSCAPES", "LANDSCAPES_ENV", "STARTUP_S", "TARGETS", "Best",
    "JobRun", "Landscape", "SimParam", "SimulatedFailure", "Value", "landscape_from_data", "landscape_names",
    "landscapes_path", "load_landscape", "main", "node_speed", "parse_job_args", "parse_xla_flags", "run_job",
]


def parse_xla_flags(xla_flags: str) -> tuple[dict[str, str], list[str]]:
    """``--name=value`` tokens -> ``{name: value}`` with the LAST occurrence winning, and the raw tokens.

    Example:
        >>> parse_xla_flags("--xla_a=1 --xla_b --xla_a=4")[0]
        {'xla_a': '4', 'xla_b': 'true'}
    """
    tokens = shlex.split(xla_flags)
    flags: dict[str, str] = {}
    for token in tokens:
        name, _, value = token.lstrip("-").partition("=")
        flags[name] = value if "=" in token else "true"
    return flags, tokens


def _next_launch(state: str) -> int:
    """Count this launch in the state file (locked: concurrent launches get distinct indices)."""
    path = Path(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        before = int(handle.read().strip() or 0)
        handle.seek(0)
        handle.truncate()
        handle.write(str(before + 1))
    return before


@dataclass(frozen=True)
class JobRun:
    """What one simulated process does, before any printing: the subprocess and ``SimExecutor`` both replay it.

    Attributes:
        exit_code: shell-style status (0, 1, 134 = SIGABRT, 143 = SIGTERM); ignored while ``hangs``.
        stdout: the step lines (each without its newline).
        stderr: the failure text ("" for none).
        fault: ``oom``, ``unknown_flag`` or one of :data:`FLAKY_KINDS`; ``None`` for a clean run.
        step_seconds: the duration of each printed step (step 0 includes compilation).
        seconds: how long the process lives, start to exit, not counting a hang's wait for the watchdog.
        hangs: the process stops printing and sleeps until it is killed.
    """

    exit_code: int
    stdout: tuple[str, ...] = ()
    stderr: str = ""
    fault: str | None = None
    step_seconds: tuple[float, ...] = ()
    seconds: float = 0.0
    hangs: bool = False


def parse_job_args(items: Sequence[str]) -> tuple[dict[str, str], dict[str, str]] | str:
    """``key=value`` items -> (reserved options, workload args), or the error text for a malformed item."""
    opts, args = dict(_RESERVED), {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            return f"sim: argument {item!r} is not key=value"
        (opts if key in _RESERVED else args)[key] = value
    return opts, args


def node_speed(env: Mapping[str, str]) -> float:
    """The speed factor of the node this job runs on: ``FLAGOPT_SIM_NODE_SPEED="node3=0.97,node4=0.97"``.

    The node is Slurm's ``SLURMD_NODENAME`` (or ``FLAGOPT_SIM_NODE``); a node not listed runs at 1.0. It lets a
    test or a benchmark give one slot of a study slower hardware than another.

    Example:
        >>> node_speed({"FLAGOPT_SIM_NODE_SPEED": "node3=0.97", "SLURMD_NODENAME": "node3"})
        0.97
    """
    node = env.get("SLURMD_NODENAME") or env.get("FLAGOPT_SIM_NODE") or ""
    for item in (env.get("FLAGOPT_SIM_NODE_SPEED") or "").split(","):
        name, sep, factor = item.partition("=")
        if sep and name.strip() == node:
            return float(factor)
    return 1.0


def run_job(opts: Mapping[str, str], args: Mapping[str, str], env: Mapping[str, str], launch: int, *,
            drift_index: float | None = None) -> JobRun:
    """The sim job's whole logic for one launch: flags, environment and args in, what it prints and how it ends out.

    Order of failures, as in a real job: an unknown flag (XLA start), an infrastructure failure at the first
    collective (NCCL, coordination service), an OOM (allocation after compilation), then a hang during the steps
    or a SIGTERM at teardown.
    """
    land = load_landscape(opts["landscape"], landscapes_path(opts.get("landscapes", ""), env))
    xla, tokens = parse_xla_flags(env.get("XLA_FLAGS", ""))
    unknown_args = sorted(k for k in args if _target_of(land, k) != "args")
    if unknown_args:
        return JobRun(_emit.RUNTIME_ERROR_EXIT_CODE,
                      stderr=f"sim: unknown workload argument(s) {unknown_args} for landscape {land.name}")
    env_settings = {n: env[n] for n, p in land.params.items() if p.target == "env" and n in env}
    settings = {**xla, **env_settings, **args}
    seed, steps = int(opts["seed"]), int(opts["steps"])
    rng = np.random.default_rng([seed, launch])
    fault = land.infra_fault(seed, launch)
    try:
        land.check_flags(xla, tokens)
        if fault == "nccl_init":
            text = (_emit.nccl_init_error() + "\njaxlib.xla_extension.XlaRuntimeError: INTERNAL: NCCL operation "
                    "ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error")
            return JobRun(_emit.RUNTIME_ERROR_EXIT_CODE, stderr=text, fault=fault,
                          seconds=STARTUP_S + land.compile_s)
        if fault == "coordination_timeout":
            text = (_emit.coordination_timeout() + "\nF0000 00:00:00.000000    1234 client.cc:1393] Terminating "
                    "process because the JAX distributed service detected fatal errors. This most likely indicates "
                    "that another task died; see the other task logs for more details.")
            return JobRun(_emit.UNKNOWN_FLAG_EXIT_CODE_OLD, stderr=text, fault=fault,
                          seconds=STARTUP_S + HEARTBEAT_TIMEOUT_S)
        values = land.sample_run(settings, launch, rng, steps, on_baseline=False, drift_index=drift_index,
                                 speed=node_speed(env))
    except SimulatedFailure as failure:
        started = STARTUP_S + (land.compile_s if failure.kind == "oom" else 0.0)
        return JobRun(failure.exit_code, stderr=failure.text, fault=failure.kind, seconds=started)
    per_step = land.total_weights / land.devices
    loss_rng = np.random.default_rng([seed, launch, 1])
    lines, seconds = [], []
    for step, tokens_per_s in enumerate(values):
        loss = 2.3 + 8.5 * math.exp(-step / 6.0) + 0.01 * float(loss_rng.standard_normal())
        seconds.append(per_step / tokens_per_s)
        lines.append(_emit.step_line(step, seconds[-1], tokens_per_s * land.tflops_per_token, tokens_per_s,
                                     land.total_weights, loss))
    if fault == "hang":
        printed = land.hang_after(seed, launch, steps)
        lines, seconds = lines[:printed], seconds[:printed]
        return JobRun(0, tuple(lines), fault=fault, step_seconds=tuple(seconds),
                      seconds=STARTUP_S + sum(seconds), hangs=True)
    if fault == "sigterm_after":
        return JobRun(_emit.SIGTERM_EXIT_CODE, tuple(lines), fault=fault, step_seconds=tuple(seconds),
                      seconds=STARTUP_S + sum(seconds))
    return JobRun(0, tuple(lines), step_seconds=tuple(seconds), seconds=STARTUP_S + sum(seconds))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one simulated job; returns its exit status (or dies of SIGABRT / SIGTERM, or hangs, like a real job)."""
    parsed = parse_job_args(sys.argv[1:] if argv is None else argv)
    if isinstance(parsed, str):
        print(parsed, file=sys.stderr)
        return _emit.RUNTIME_ERROR_EXIT_CODE
    opts, args = parsed
    launch = int(opts["launch"]) if opts["launch"] else _launch_index()
    job = run_job(opts, args, os.environ, launch)
    for line in job.stdout:
        time.sleep(float(opts["step_s"]))
        print(line, flush=True)
    if job.stderr:
        print(job.stderr, file=sys.stderr, flush=True)
    if job.hangs:
        while True:  # like a stuck collective: only the runner's watchdog ends it
            time.sleep(3600)
    if job.exit_code in (_emit.UNKNOWN_FLAG_EXIT_CODE_OLD, _emit.SIGTERM_EXIT_CODE):
        _die(job.exit_code - 128)
    return job.exit_code


def _die(sig: int) -> None:
    """End by ``sig`` (SIGABRT, SIGTERM) as the real process does: Popen sees ``-sig``, a shell ``128 + sig``."""
    sys.stdout.flush()
    sys.stderr.flush()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # an abort leaves no core file behind
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    time.sleep(5)  # the signal is delivered asynchronously
    os._exit(128 + sig)


def _target_of(land: Landscape, name: str) -> str | None:
    """The target (``xla``/``env``/``args``) of a landscape param, ``None`` for a name it does not know."""
    param = land.params.get(name)
    return param.target if param else None


def _launch_index() -> int:
    state = os.environ.get("FLAGOPT_SIM_STATE", "")
    return _next_launch(state) if state else 0


if __name__ == "__main__":
    sys.exit(main())
