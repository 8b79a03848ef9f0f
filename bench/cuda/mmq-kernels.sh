#!/usr/bin/env bash
# Builds and runs mmq_kernels.cu on a GPU machine (nvcc on the PATH or in
# CUDA_HOME): the tensor-core matmuls against the decode kernels, bits and
# time. Usage: bench/cuda/mmq-kernels.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${CUDA_HOME:+$CUDA_HOME/bin/}nvcc
command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
out=${TMPDIR:-/tmp}/mmq_kernels
"$NVCC" -O3 --use_fast_math -std=c++17 -arch=sm_90 -o "$out" mmq_kernels.cu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
"$out" "${1:-50}"
