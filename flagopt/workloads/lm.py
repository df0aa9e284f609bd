"""Reference JAX workload: a small transformer trained with FSDP, tensor or pipeline parallelism.

Run it as ``python -m flagopt.workloads.lm key=value ...`` (every argument is ``key=value``, MaxText
style, so flagopt can append tuned workload settings). It uses every local device: the GPUs when there
are any, else ``host_devices`` CPU devices. It prints MaxText-format step lines::

    completed step: 3, seconds: 0.412, TFLOP/s/device: 1.234, Tokens/s/device: 99.000, total_weights: 512, loss: 5.101

Step 0 includes compilation. A bad argument prints one line naming the key and exits 2.

Example:
    python -m flagopt.workloads.lm mode=pp num_pipeline_microbatches=8 dtype=f32
"""

from __future__ import annotations

import os
import sys
import time

from flagopt.errors import EXIT_USAGE, FlagoptError
from flagopt.workloads._lm_config import LMConfig, check_layout, parse_args

__all__ = ["LMConfig", "main", "parse_args"]

_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def _prepend_host_device_flag(host_devices: int) -> None:
    """Prepend the CPU device-count flag to ``XLA_FLAGS`` (must run before JAX is imported).

    Prepending keeps whatever the caller set: XLA takes the last of repeated flags, and flagopt appends
    the tuned flags after the ones already there. The flag only affects the CPU platform, so it is
    harmless on GPU hosts.
    """
    existing = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{_DEVICE_COUNT_FLAG}={host_devices} {existing}".strip()


def _run(config: LMConfig) -> None:
    import jax
    import jaxlib
    import numpy as np
    from jax.sharding import Mesh

    from flagopt.workloads import _lm_model as model

    devices = jax.devices()
    n = len(devices)
    print(f"System Information: Jax Version: {jax.__version__}", flush=True)
    print(f"System Information: Jaxlib Version: {jaxlib.__version__}", flush=True)
    print(f"System Information: Jax Backend: {jax.default_backend()}", flush=True)
    print(f"Num_devices: {n}, device kind: {devices[0].device_kind}", flush=True)
    check_layout(config, n)
    shown = {**vars(config), "d_ff": config.ff, "stages": config.stages or n}
    # Printed as key=value words that parse_args accepts again, so a log line can rebuild the run.
    words = (f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in shown.items())
    print("Config: " + " ".join(words), flush=True)
    print(f"Model: params={model.matmul_params(config) + config.vocab * config.d_model} "
          f"model_flops_per_step={model.model_flops_per_step(config):.4g}", flush=True)

    mesh = Mesh(np.array(devices), (config.mode,))
    if config.mode == "pp":
        from flagopt.workloads._lm_pipeline import build_pipeline

        params, tokens, step, sched = build_pipeline(config, mesh)
        print(f"Pipeline: stages={sched.stages} repeats={sched.repeats} "
              f"num_pipeline_microbatches={sched.microbatches} "
              f"microbatch_size={config.batch // sched.microbatches} iterations={sched.iterations} "
              f"bubble_fraction={sched.bubble_fraction:.3f}", flush=True)
    else:
        from flagopt.workloads._lm_parallel import build_spmd

        params, tokens, step = build_spmd(config, mesh)

    flops = model.model_flops_per_step(config)
    total = config.batch * config.seq
    for i in range(config.steps):
        start = time.perf_counter()
        params, value = step(params, tokens)
        loss = float(value)  # blocks until the step is done
        dt = time.perf_counter() - start
        print(f"completed step: {i}, seconds: {dt:.3f}, TFLOP/s/device: {flops / dt / n / 1e12:.3f}, "
              f"Tokens/s/device: {total / dt / n:.3f}, total_weights: {total}, loss: {loss:.3f}",
              flush=True)


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments, run the benchmark, return the exit code."""
    try:
        config = parse_args(sys.argv[1:] if argv is None else argv)
        _prepend_host_device_flag(config.host_devices)
        _run(config)
    except FlagoptError as err:
        print(f"error: {err.message}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
