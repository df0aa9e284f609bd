# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-fsdp, trial 8 (overlap2)
# UNCONFIRMED: overlap2 (trial 8) +1.95 % [+0.31, +3.60] vs baseline-deployed over 3 fresh runs (4 in all); best estimate so far, not a confirmed winner (verdict budget: max_trials (40) runs used; no configuration is confirmed better than baseline-deployed)
# model_tag lm-16x4096 · parallelism FSDP=2 · nodelist - · host vm · job 9327
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H200
# exported 2026-11-26T04:24:10+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
if [ -z "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then echo "flagopt: this patch needs bash: source it from bash (bash -c '. ./env.sh && your-command'), not sh" >&2; return 1 2>/dev/null || exit 1; fi
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=FSDP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  echo 'flagopt: WARNING: UNCONFIRMED: overlap2 (trial 8) +1.95 % [+0.31, +3.60] vs baseline-deployed over 3 fresh runs (4 in all); best estimate so far, not a confirmed winner (verdict budget: max_trials (40) runs used; no configuration is confirmed better than baseline-deployed)' >&2
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }"--xla_gpu_experimental_parallel_collective_overlap_limit=2
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
