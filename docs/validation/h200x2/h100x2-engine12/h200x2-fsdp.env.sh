# flagopt export: source this after the deployed environment is set (bash).
# study h200x2-fsdp, trial 8 (overlap2)
# CONFIRMED: overlap2 (trial 8) +2.35 % [+1.37, +3.32] vs baseline-deployed over 5 fresh runs (6 in all); verdict budget: max_trials (40) runs used; best confirmed: overlap2 +2.3% [+1.4%, +3.3%] over 5 fresh runs (not confirmed above the 5% win bar at the family-wise confidence)
# model_tag lm-16x4096 · parallelism FSDP=2 · nodelist - · host vm · job 9324
# jax 0.11.2, jaxlib 0.11.2; 2 x NVIDIA H100 80GB HBM3
# exported 2026-11-25T21:09:56+00:00 by flagopt 0.1.0
# XLA flags are appended: XLA reads a repeated flag last-wins, so these override the deployed ones.
if [ -z "${BASH_VERSION:-}${ZSH_VERSION:-}" ]; then echo "flagopt: this patch needs bash: source it from bash (bash -c '. ./env.sh && your-command'), not sh" >&2; return 1 2>/dev/null || exit 1; fi
# Applies only to the cell it was tuned on: set FLAGOPT_PARALLELISM to say which cell a job runs.
_flagopt_cell=FSDP=2
if [[ "${FLAGOPT_PARALLELISM:-$_flagopt_cell}" == "$_flagopt_cell" ]]; then
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }"--xla_gpu_experimental_parallel_collective_overlap_limit=2
else
  echo "flagopt: patch tuned for $_flagopt_cell not applied (FLAGOPT_PARALLELISM=${FLAGOPT_PARALLELISM-})" >&2
fi
unset _flagopt_cell
