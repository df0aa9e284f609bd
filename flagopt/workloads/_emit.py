"""The exact lines a real JAX training job prints, for simulated and faulty workloads.

Every text here copies a real jax / XLA / NCCL / MaxText output (see ``tests/fixtures/failures/`` for the public
originals), so the classifier and log parser are tested against what production logs contain, not against a
format of our own.

Example:
    >>> step_line(3, 0.324, 651.649, 50574.62, 32768, 2.345)
    'completed step: 3, seconds: 0.324, TFLOP/s/device: 651.649, Tokens/s/device: 50574.620, total_weights: 32768, loss: 2.345'
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence

#: jaxlib <= 0.6 aborts (SIGABRT) on an unknown flag: a shell reports 134, Python's ``returncode`` -6.
UNKNOWN_FLAG_EXIT_CODE_OLD = 134
#: jaxlib >= 0.7 (absl logging) exits with status 1 on the same fatal line (measured, reference log).
UNKNOWN_FLAG_EXIT_CODE = 1
#: An uncaught ``XlaRuntimeError`` (OOM, NCCL init, coordination) ends Python with status 1.
RUNTIME_ERROR_EXIT_CODE = 1
#: SIGTERM as seen by a shell / Slurm (128 + 15); Python's ``returncode`` is -15.
SIGTERM_EXIT_CODE = 143
#: SIGSEGV as seen by a shell (128 + 11); Python's ``returncode`` is -11.
SEGFAULT_EXIT_CODE = 139
#: The first jaxlib whose XLA logs through absl (``F1121 23:22:37.115195   20305 file.cc:NNN]``).
ABSL_LOG_SINCE = (0, 7)


def step_line(
    step: int,
    seconds: float,
    tflops: float,
    tokens_per_s: float,
    total_weights: int,
    loss: float,
) -> str:
    """One MaxText ``completed step`` line (the current format, as in MaxText's metric logger)."""
    loss_text = "nan" if math.isnan(loss) else f"{loss:.3f}"
    return (
        f"completed step: {step}, seconds: {seconds:.3f}, TFLOP/s/device: {tflops:.3f}, "
        f"Tokens/s/device: {tokens_per_s:.3f}, total_weights: {total_weights}, loss: {loss_text}"
    )


def _glog_prefix(level: str, source: str) -> str:
    """The pre-0.7 XLA prefix: ``2024-07-30 01:35:14.107390: W external/xla/xla/<source>]``."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
    return f"{stamp}: {level} external/xla/xla/{source}]"


def _absl_prefix(level: str, source: str) -> str:
    """The absl prefix of jaxlib >= 0.7: ``F1121 23:22:37.115195   20305 parse_flags_from_env.cc:234]``."""
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
    return f"{level}{stamp} {os.getpid():>7} {source.rsplit('/', 1)[-1]}]"


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def unknown_flags_message(flags: Sequence[str], jaxlib_version: str = "0.10.2", stale: Sequence[str] = ()) -> str:
    """The fatal line XLA prints when ``XLA_FLAGS`` holds flags it does not know.

    jaxlib >= 0.7 uses absl logging, older versions a glog-like prefix. jaxlib < 0.6 also prints leftover argv
    entries: an empty one (hence a double space) followed by ``stale`` flags that are actually known, so only
    the text before the first double space is reliable there (reference log, jaxlib 0.4.28 - 0.5.0).

    Example:
        >>> unknown_flags_message(["--xla_x=1", "--xla_y=2"], "0.10.2").split("] ", 1)[1]
        'Unknown flags in XLA_FLAGS: --xla_x=1 --xla_y=2'
        >>> unknown_flags_message(["--xla_x=1"], "0.5.0", stale=["--xla_k=0"]).split("] ", 1)[1]
        'Unknown flags in XLA_FLAGS: --xla_x=1  --xla_k=0 '
    """
    version = _version_tuple(jaxlib_version)
    entries = list(flags)
    if version < (0, 6) and stale:
        entries += ["", *stale]
    # XLA writes "Unknown flag" for one entry and "Unknown flags" for several (parse_flags_from_env.cc).
    text = f"Unknown flag{'s' if len(entries) > 1 else ''} in XLA_FLAGS: " + " ".join(entries)
    if version >= ABSL_LOG_SINCE:
        return f"{_absl_prefix('F', 'parse_flags_from_env.cc:234')} {text}"
    trailer = " " if version < (0, 6) else ""
    return f"{_glog_prefix('F', 'parse_flags_from_env.cc:225')} {text}{trailer}"


def unknown_flags_exit_code(jaxlib_version: str = "0.10.2") -> int:
    """Shell-style exit status of the abort: 134 (SIGABRT) before jaxlib 0.7, 1 since (reference log)."""
    return UNKNOWN_FLAG_EXIT_CODE if _version_tuple(jaxlib_version) >= ABSL_LOG_SINCE else UNKNOWN_FLAG_EXIT_CODE_OLD


def oom_message(requested_bytes: int) -> str:
    """The ``RESOURCE_EXHAUSTED`` block of a GPU out-of-memory, with its BufferAssignment statistics."""
    gib = requested_bytes / 2**30
    rounded = -(-requested_bytes // 256) * 256  # the BFC allocator rounds requests up to 256 bytes
    return "\n".join(
        [
            f"{_glog_prefix('W', 'tsl/framework/bfc_allocator.cc:501')} Allocator (GPU_0_bfc) ran out of memory "
            f"trying to allocate {gib:.2f}GiB (rounded to {rounded})requested by op ",
            "Traceback (most recent call last):",
            '  File "train.py", line 412, in train_loop',
            "    state, metrics = p_train_step(state, example_batch, nextrng)",
            f"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
            f"{requested_bytes} bytes.",
            "BufferAssignment OOM Debugging.",
            "BufferAssignment stats:",
            "             parameter allocation:  372.76MiB",
            "              constant allocation:    48.5KiB",
            "        maybe_live_out allocation:    9.64GiB",
            f"     preallocated temp allocation:    {gib:.2f}GiB",
            f"                 total allocation:   {gib + 10.1:.2f}GiB",
            "              total fragmentation:  680.30MiB (4.60%)",
        ]
    )


def nccl_init_error(rank: int = 4, replica: int = 6) -> str:
    """NCCL bootstrap failure and the XLA ``ncclCommInitRank ... unhandled system error`` that follows."""
    host, pid = "node-000", os.getpid()
    nccl = [
        f"{host}:{pid}:{pid + 454} [{rank}] NCCL INFO misc/socket.cc:666 -> 2",
        f"{host}:{pid}:{pid + 454} [{rank}] NCCL INFO bootstrap.cc:280 -> 2",
        f"{host}:{pid}:{pid + 454} [{rank}] NCCL INFO init.cc:1388 -> 2",
        f"{host}:{pid}:{pid + 454} [{rank}] NCCL INFO init.cc:1641 -> 2",
    ]
    return "\n".join(
        [
            *nccl,
            f"{_glog_prefix('W', 'service/gpu/runtime/support.cc:58')} Intercepted XLA runtime error:",
            "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation "
            "ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error (run with NCCL_DEBUG=INFO "
            "for details). Last NCCL warning(error) log entry (may be unrelated) 'socketTryAccept: Accept failed: "
            "Bad file descriptor'.",
            f"{_glog_prefix('E', 'pjrt/pjrt_stream_executor_client.cc:2732')} Execution of replica {replica} failed: "
            "INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' "
            "failed: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclCommInitRank(&comm, nranks, "
            "id, rank) failed: unhandled system error",
        ]
    )


def coordination_timeout(task: int = 0) -> str:
    """The coordination service's heartbeat timeout (``UNAVAILABLE``) for one task."""
    name = f"/job:jax_worker/replica:0/task:{task}"
    return (
        f"{_glog_prefix('E', 'tsl/distributed_runtime/coordination/coordination_service.cc:1170')} {name} has been "
        f"set to ERROR in coordination service: UNAVAILABLE: Task {name} heartbeat timeout. This indicates that the "
        "remote task has failed, got preempted, or crashed unexpectedly. Check the task logs for an earlier error "
        "to debug further. [type.googleapis.com/tensorflow.CoordinationServiceError='']"
    )


def segfault_message() -> str:
    """What Python's faulthandler prints when the process dies of SIGSEGV inside XLA."""
    return "\n".join(
        [
            "Fatal Python error: Segmentation fault",
            "",
            "Current thread 0x00007f3a2b7fe740 (most recent call first):",
            '  File "/usr/lib/python3/site-packages/jax/_src/interpreters/pxla.py", line 1297 in __call__',
            '  File "train.py", line 412 in train_loop',
        ]
    )
