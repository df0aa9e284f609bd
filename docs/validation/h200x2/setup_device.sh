#!/usr/bin/env bash
# Source on the 2xH200 machine (no network there): install the carried wheels (optuna, submitit, plotly, rich and
# their needs; jax 0.11.2 with CUDA, numpy, scipy, pandas and pyyaml are in the image) and put flagopt on the path.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || return 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
# Keep NVLink multicast off (the machine's rule); flagopt's env handling never touches these.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
