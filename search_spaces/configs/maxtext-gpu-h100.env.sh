# The job environment deployed today for MaxText on Hopper nodes (what `baseline-deployed` measures).
# flagopt reads this file WITHOUT a shell: one `export NAME=value` per line, quotes are honoured,
# nothing is expanded ($VAR and backticks are refused), other shell statements are an error.
# The NVIDIA JAX-Toolbox image already sets the latency-hiding scheduler in its ENV (Dockerfile.jax);
# it is repeated here so the baseline does not depend on which image a node happens to run.
export XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true"
# JAX-Toolbox sets this at runtime on Hopper only (cc 9.0); on Blackwell it slows training down.
export CUDA_DEVICE_MAX_CONNECTIONS=1
# JAX preallocates 75 % of GPU memory by default; JAX-Toolbox recommends 0.8-0.9 for LLM training.
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.9
