# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-pp, trial 4 (microbatches_8)
# UNCONFIRMED: microbatches_8 (trial 4) +2.04 % [+1.30, +2.78] vs baseline-deployed over 3 runs; best estimate so far, not a confirmed winner (the study has no verdict yet)
# model_tag lm-8x4096 · parallelism PP=2 · nodelist - · host vm · job 16372
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H200
# exported 2026-11-22T01:29:22+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=PP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  echo 'flagopt: WARNING: UNCONFIRMED: microbatches_8 (trial 4) +2.04 % [+1.30, +2.78] vs baseline-deployed over 3 runs; best estimate so far, not a confirmed winner (the study has no verdict yet)' >&2
  # workload arguments: append them to the training command, e.g. python -m train ... "${FLAGOPT_WORKLOAD_ARGS[@]}"
  FLAGOPT_WORKLOAD_ARGS=(num_pipeline_microbatches=8)
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
