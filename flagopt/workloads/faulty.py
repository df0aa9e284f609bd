"""A training-job stand-in that fails, for real, the way JAX jobs fail.

Run as ``python -m flagopt.workloads.faulty scenario=<name> steps=15 step_s=0.01 ...``. Every scenario is a real
process with a real exit: it prints MaxText step lines and the exact jax/XLA/NCCL/Slurm failure texts
(:mod:`flagopt.workloads._emit`) and ends with the status a real job would have (``os.abort()`` for an XLA fatal,
``SIGSEGV``, ``SIGTERM``...), so the watchdog, log capture and classifier are exercised end to end.

Like XLA at backend start, every scenario first checks ``XLA_FLAGS``: a flag named in ``bad_flags=`` or one the
flag registry says the emulated ``jaxlib=`` version no longer (or not yet) accepts aborts the process with the
real "Unknown flag(s) in XLA_FLAGS" line. ``scenario=unknown-flag`` therefore behaves like ``ok`` when the flags
are clean.

Scenarios:
    ok, unknown-flag: all steps, exit 0.
    oom: ``after`` steps (default 0), then RESOURCE_EXHAUSTED for ``bytes``, exit 1.
    nccl-init: NCCL bootstrap failure before any step, exit 1.
    coordination-timeout: ``after`` steps (default 2), heartbeat timeout, then XLA's abort.
    hang: ``after`` steps (default 3), then sleeps until killed.  hang-init: never prints a step.
    sigterm-after-window: all steps, then kills itself with SIGTERM (exit 143 / -15).
    preempted, time-limit: ``after`` steps (default 3), Slurm's cancellation banner, then SIGTERM.
    nan: loss becomes ``nan`` from step ``after`` (default 5); exit 0.
    loss-drift: finite loss shifted by ``loss_shift`` (default 0.5); exit 0.
    crash: ``after`` steps (default 2), a traceback, then SIGSEGV (exit 139 / -11).
    flaky: NCCL init failure on the first ``fail_first`` (default 2) launches counted in ``state=PATH``, then ok;
        with ``faults=hang,nccl-init,...`` the launches counted there run those scenarios in turn, then ok.

A straggler, in any scenario that runs steps: ``slow_launches=3,7`` (launches counted in ``state=PATH`` from 0)
run every step ``slow`` (default 0.05) slower, a slow node or a neighbour's job for that run only.

Example:
    python -m flagopt.workloads.faulty scenario=hang after=2 steps=15 step_s=0.01
"""

from __future__ import annotations

import math
import os
import random
import resource
import shlex
import signal
import sys
import time
from pathlib import Path

from flagopt.workloads import _emit

SCENARIOS = (
    "ok", "unknown-flag", "oom", "nccl-init", "coordination-timeout", "hang", "hang-init",
    "sigterm-after-window", "preempted", "time-limit", "nan", "loss-drift", "crash", "flaky",
)  # fmt: skip
_DEFAULTS: dict[str, str] = {
    "scenario": "ok", "steps": "15", "step_s": "0.01", "after": "", "bad_flags": "", "jaxlib": "0.10.2",
    "bytes": "4770354232", "state": "", "fail_first": "2", "loss_shift": "0.5", "tokens_per_s": "50000",
    "seed": "0", "noise": "0", "faults": "", "slow_launches": "", "slow": "0.05",
}  # fmt: skip
_DEFAULT_AFTER = {"oom": 0, "coordination-timeout": 2, "hang": 3, "preempted": 3, "time-limit": 3, "nan": 5, "crash": 2}
#: Lines real jobs print that are harmless; ``noise=1`` mixes them in so the classifier must ignore them.
_NOISE = (
    "E0000 00:00:1732230000.000000    1234 cuda_executor.cc:1001] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "MSCCL++: Feature not enabled",
    "node-000:1234:1300 [0] NCCL INFO LL cutoff points not detected",
)


def _parse(argv: list[str]) -> dict[str, str]:
    opts = dict(_DEFAULTS)
    for token in argv:
        key, sep, value = token.partition("=")
        if not sep or key not in opts:
            sys.exit(f"faulty: unknown argument {token!r}; expected key=value with key in {sorted(opts)}")
        opts[key] = value
    if opts["scenario"] not in SCENARIOS:
        sys.exit(f"faulty: unknown scenario {opts['scenario']!r}; choose one of {', '.join(SCENARIOS)}")
    return opts


def _die(sig: int) -> None:
    """End by ``sig`` like the real failure does, without leaving a core file behind."""
    sys.stdout.flush()
    sys.stderr.flush()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    time.sleep(5)  # the signal is delivered asynchronously
    os._exit(128 + sig)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rejected_flags(tokens: list[str], bad: set[str], jaxlib: str) -> list[str]:
    from flagopt.flags import FlagRegistry, flag_name

    registry = FlagRegistry.load()
    return [
        token
        for token in tokens
        if flag_name(token) in bad or not token.startswith("--") or not registry.accepted_by(flag_name(token), jaxlib)
    ]


def _check_flags(opts: dict[str, str]) -> None:
    bad = {name.strip().lstrip("-") for name in opts["bad_flags"].split(",") if name.strip()}
    tokens = shlex.split(os.environ.get("XLA_FLAGS", ""))
    rejected = _rejected_flags(tokens, bad, opts["jaxlib"])
    if not rejected:
        return
    # Old jaxlibs also print leftover argv entries; emulate the observed layout (see _emit.unknown_flags_message).
    stale = tokens[len(rejected) + 1 :]
    _err(_emit.unknown_flags_message(rejected, opts["jaxlib"], stale))
    if _emit.unknown_flags_exit_code(opts["jaxlib"]) == _emit.UNKNOWN_FLAG_EXIT_CODE_OLD:
        _die(signal.SIGABRT)
    sys.exit(_emit.UNKNOWN_FLAG_EXIT_CODE)


def _launch_count(state: str) -> int:
    """Count this launch in ``state`` and return how many launches came before it."""
    if not state:
        sys.exit("faulty: scenario=flaky and slow_launches= need state=PATH (a file that counts the launches)")
    path = Path(state)
    before = int(path.read_text() or 0) if path.exists() else 0
    path.write_text(str(before + 1))
    return before


def _steps(opts: dict[str, str], count: int, scenario: str, slowdown: float = 0.0) -> None:
    rng = random.Random(int(opts["seed"]))
    base = float(opts["tokens_per_s"]) * (1.0 - slowdown)
    nan_from = int(opts["after"] or _DEFAULT_AFTER["nan"]) if scenario == "nan" else None
    shift = float(opts["loss_shift"]) if scenario == "loss-drift" else 0.0
    for step in range(count):
        time.sleep(float(opts["step_s"]))
        tokens = base * (1.0 + rng.gauss(0.0, 0.003))
        loss = 2.0 + 8.0 * math.exp(-0.2 * step) + shift
        if nan_from is not None and step >= nan_from:
            loss = math.nan
        print(_emit.step_line(step, 32768 / tokens, tokens * 0.0129, tokens, 32768, loss), flush=True)
        if opts["noise"] == "1" and step == 1:
            for line in _NOISE:
                _err(line)


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def _slurm_banner(reason: str) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    return f"slurmstepd: error: *** STEP 4242.0 ON node-1 CANCELLED AT {stamp} DUE TO {reason} ***"


def main(argv: list[str] | None = None) -> None:
    """Run one scenario; see the module docstring."""
    opts = _parse(sys.argv[1:] if argv is None else argv)
    scenario, steps = opts["scenario"], int(opts["steps"])
    _check_flags(opts)
    before = _launch_count(opts["state"]) if scenario == "flaky" or opts["slow_launches"] else None
    if scenario == "flaky":
        faults = opts["faults"].split(",") if opts["faults"] else ["nccl-init"] * int(opts["fail_first"])
        unknown = [f for f in faults if f not in SCENARIOS or f == "flaky"]
        if unknown:
            sys.exit(f"faulty: faults= names unknown scenarios {', '.join(unknown)}")
        scenario = faults[before] if before < len(faults) else "ok"
    slowdown = float(opts["slow"]) if str(before) in opts["slow_launches"].split(",") else 0.0
    after = int(opts["after"]) if opts["after"] else _DEFAULT_AFTER.get(scenario, 0)

    if scenario in ("ok", "unknown-flag", "nan", "loss-drift", "sigterm-after-window"):
        _steps(opts, steps, scenario, slowdown)
        if scenario == "sigterm-after-window":
            _die(signal.SIGTERM)
        return
    if scenario == "nccl-init":
        _err(_emit.nccl_init_error())
        _err("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) "
             "failed: unhandled system error")  # fmt: skip
        sys.exit(_emit.RUNTIME_ERROR_EXIT_CODE)
    if scenario == "hang-init":
        _sleep_forever()

    _steps(opts, min(after, steps), scenario, slowdown)
    if scenario == "oom":
        _err(_emit.oom_message(int(opts["bytes"])))
        sys.exit(_emit.RUNTIME_ERROR_EXIT_CODE)
    if scenario == "coordination-timeout":
        _err(_emit.coordination_timeout())
        _err("F0000 00:00:00.000000    1234 client.cc:1393] Terminating process because the JAX distributed service "
             "detected fatal errors. This most likely indicates that another task died; see the other task logs "
             "for more details.")  # fmt: skip
        _die(signal.SIGABRT)
    if scenario == "hang":
        _sleep_forever()
    if scenario in ("preempted", "time-limit"):
        _err(_slurm_banner("PREEMPTION" if scenario == "preempted" else "TIME LIMIT"))
        _die(signal.SIGTERM)
    if scenario == "crash":
        _err(_emit.segfault_message())
        _die(signal.SIGSEGV)


if __name__ == "__main__":
    main()
