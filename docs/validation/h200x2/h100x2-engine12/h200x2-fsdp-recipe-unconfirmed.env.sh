# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-fsdp, trial 9 (jax_toolbox_llm)
# UNCONFIRMED: jax_toolbox_llm (trial 9) +3.42 % [+2.21, +4.63] vs baseline-deployed over 1 run; best estimate so far, not a confirmed winner (the study has no verdict yet)
# model_tag lm-16x4096 · parallelism FSDP=2 · nodelist - · host vm · job 10267
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H100 80GB HBM3
# exported 2026-11-25T17:47:06+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
if [ -z "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then echo "flagopt: this patch needs bash: source it from bash (bash -c '. ./env.sh && your-command'), not sh" >&2; return 1 2>/dev/null || exit 1; fi
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=FSDP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  echo 'flagopt: WARNING: UNCONFIRMED: jax_toolbox_llm (trial 9) +3.42 % [+2.21, +4.63] vs baseline-deployed over 1 run; best estimate so far, not a confirmed winner (the study has no verdict yet)' >&2
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }"'--xla_gpu_enable_triton_gemm=false --xla_gpu_all_reduce_combine_threshold_bytes=1073741824 --xla_gpu_all_gather_combine_threshold_bytes=1073741824 --xla_gpu_reduce_scatter_combine_threshold_bytes=134217728 --xla_gpu_enable_pipelined_all_gather=true --xla_gpu_enable_pipelined_reduce_scatter=true --xla_gpu_enable_pipelined_all_reduce=true --xla_gpu_enable_while_loop_double_buffering=true --xla_disable_hlo_passes=rematerialization'
  export CUDA_DEVICE_MAX_CONNECTIONS=1
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
