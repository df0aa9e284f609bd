#!/usr/bin/env bash
# Does a boolean XLA flag change what the 2xH200 FSDP job runs? Compile the job's train step with the flag unset,
# =true and =false (4 steps each, the deployed latency-hiding scheduler on) and compare the optimized HLO modules
# once metadata, ids, backend configs (autotuned GEMM algorithms, fusion emitters) and fingerprints are stripped.
# Usage, on the device (1 minute): bash docs/validation/h200x2/same_program.sh xla_gpu_enable_pipelined_reduce_scatter
# Where flagopt's dependencies are installed, `python -m flagopt evidence A --same-as B` makes the same comparison
# (it also leaves out the dumps' source-location tables) on the modules this writes to $OUT.
set -u
flag=${1:?usage: same_program.sh FLAG_NAME}
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"
for v in unset true false; do
  extra=(); [ "$v" != unset ] && extra=("--$flag=$v")
  XLA_FLAGS="--xla_gpu_enable_latency_hiding_scheduler=true ${extra[*]} --xla_dump_to=/tmp/same_$v --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*" \
    timeout 120 python3 -m flagopt.workloads.lm mode=fsdp layers=16 d_model=4096 heads=32 batch=4 seq=2048 \
    vocab=32000 steps=4 > "/tmp/same_$v.log" 2>&1 || { echo "$v: the job failed (/tmp/same_$v.log)"; exit 1; }
  module=$(ls /tmp/same_$v/*train_step*after_optimizations.txt | head -1)
  sed -E 's/, metadata=\{[^}]*\}//g; s/(stack_frame_id|channel_id)=[0-9]+//g; s/backend_config=\{.*$//;
          s/kind=k[A-Za-z]+//; s/fingerprint_before_lhs="[0-9a-f]+"//' "$module" > "/tmp/same_$v.hlo"
  gzip -c "$module" > "$out/${flag}_$v.txt.gz"
  echo "$v: $(wc -l < "/tmp/same_$v.hlo") lines, $(grep -c 'reduce-scatter(' "/tmp/same_$v.hlo") reduce-scatters, $(grep -c 'all-gather(' "/tmp/same_$v.hlo") all-gathers"
done
for v in true false; do
  if cmp -s <(sort /tmp/same_unset.hlo) <(sort "/tmp/same_$v.hlo"); then
    echo "unset and =$v: the same instructions ($(diff /tmp/same_unset.hlo "/tmp/same_$v.hlo" | grep -c '^<') in another order)"
  else
    echo "unset and =$v: different programs ($(diff <(sort /tmp/same_unset.hlo) <(sort "/tmp/same_$v.hlo") | grep -c '^[<>]') lines differ)"
  fi
done
