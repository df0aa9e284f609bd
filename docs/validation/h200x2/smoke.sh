#!/usr/bin/env bash
# First look at the 2xH200 machine: versions, workload sizes and one flag A/B, then a 3-run flagopt study.
set -u
. docs/validation/h200x2/setup_device.sh || exit 1
nvidia-smi -L; python3 -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__, jax.devices())"
lm() { /usr/bin/time -f "wall %e s" python3 -m flagopt.workloads.lm "$@" 2>&1 | grep -E "completed step: (1|9|14),|wall|Error|error" ; }
A="mode=fsdp layers=8 d_model=4096 heads=32 batch=16 seq=2048 vocab=32000"
B="mode=fsdp layers=16 d_model=4096 heads=32 batch=4 seq=2048 vocab=32000"
echo "== A"; lm $A
echo "== A pipelined"; XLA_FLAGS="--xla_gpu_enable_pipelined_all_gather=true --xla_gpu_enable_pipelined_reduce_scatter=true" lm $A
echo "== B"; lm $B
echo "== B pipelined"; XLA_FLAGS="--xla_gpu_enable_pipelined_all_gather=true --xla_gpu_enable_pipelined_reduce_scatter=true" lm $B
echo "== PP m4"; lm mode=pp layers=8 d_model=4096 heads=32 batch=16 seq=2048 vocab=32000 num_pipeline_microbatches=4
echo "== PP m16"; lm mode=pp layers=8 d_model=4096 heads=32 batch=16 seq=2048 vocab=32000 num_pipeline_microbatches=16
