# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-fsdp, trial 32 (combination: cuda_connections=1, double_buffering=true, overlap_limit=2, rs_threshold=134217728)
# CONFIRMED: combination: cuda_connections=1, double_buffering=true, overlap_limit=2, rs_threshold=134217728 (trial 32) +3.17 % [+2.36, +3.99] vs baseline-deployed over 2 fresh runs (3 in all); verdict budget: max_trials (40) runs used; best confirmed: combination: cuda_connections=1, double_buffering=true, overlap_limit=2, rs_threshold=134217728 +3.2% [+2.4%, +4.0%] over 2 fresh runs (not confirmed above the 5% win bar at the family-wise confidence)
# model_tag lm-16x4096 · parallelism FSDP=2 · nodelist - · host vm · job 32510
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H200
# exported 2026-11-29T22:21:53+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
if [ -z "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then echo "flagopt: this patch needs bash: source it from bash (bash -c '. ./env.sh && your-command'), not sh" >&2; return 1 2>/dev/null || exit 1; fi
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=FSDP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }"'--xla_gpu_reduce_scatter_combine_threshold_bytes=134217728 --xla_gpu_enable_while_loop_double_buffering=true --xla_gpu_experimental_parallel_collective_overlap_limit=2'
  export CUDA_DEVICE_MAX_CONNECTIONS=1
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
