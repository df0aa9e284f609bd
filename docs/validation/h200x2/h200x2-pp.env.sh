# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-pp, trial 14 (sampled#14)
# UNCONFIRMED: sampled#14 (trial 14) +2.10 % [+1.06, +3.14] vs baseline-deployed over 2 runs; best estimate so far, not a confirmed winner (the study has no verdict yet)
# model_tag lm-8x4096 · parallelism PP=2 · nodelist - · host vm · job 25429
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H200
# exported 2026-11-22T00:42:21+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=PP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  echo 'flagopt: WARNING: UNCONFIRMED: sampled#14 (trial 14) +2.10 % [+1.06, +3.14] vs baseline-deployed over 2 runs; best estimate so far, not a confirmed winner (the study has no verdict yet)' >&2
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }"'--xla_gpu_collective_permute_decomposer_threshold=1048576 --xla_gpu_enable_pipelined_p2p=false --xla_gpu_experimental_pipeline_parallelism_opt_level=PIPELINE_PARALLELISM_OPT_LEVEL_ENABLE --xla_gpu_experimental_parallel_collective_overlap_limit=1 --xla_gpu_enable_latency_hiding_scheduler=true'
  export NCCL_PROTO=LL
  # workload arguments: append them to the training command, e.g. python -m train ... "${FLAGOPT_WORKLOAD_ARGS[@]}"
  FLAGOPT_WORKLOAD_ARGS=(num_pipeline_microbatches=8)
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
