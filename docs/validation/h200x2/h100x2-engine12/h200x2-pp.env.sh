# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-pp, trial 3 (microbatches_8)
# UNCONFIRMED: microbatches_8 (trial 3) +0.75 % [-3.96, +5.45] vs baseline-deployed over 1 run; best estimate so far, not a confirmed winner (verdict budget: max_trials (20) runs used; no configuration is confirmed better than baseline-deployed)
# model_tag lm-8x4096 · parallelism PP=2 · nodelist - · host vm · job 11195
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H100 80GB HBM3
# exported 2026-11-25T21:10:03+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
if [ -z "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then echo "flagopt: this patch needs bash: source it from bash (bash -c '. ./env.sh && your-command'), not sh" >&2; return 1 2>/dev/null || exit 1; fi
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=PP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  echo 'flagopt: WARNING: UNCONFIRMED: microbatches_8 (trial 3) +0.75 % [-3.96, +5.45] vs baseline-deployed over 1 run; best estimate so far, not a confirmed winner (verdict budget: max_trials (20) runs used; no configuration is confirmed better than baseline-deployed)' >&2
  # workload arguments: append them to the training command, e.g. python -m train ... "${FLAGOPT_WORKLOAD_ARGS[@]}"
  FLAGOPT_WORKLOAD_ARGS=(num_pipeline_microbatches=8)
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
