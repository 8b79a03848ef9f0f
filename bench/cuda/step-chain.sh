#!/usr/bin/env bash
# Builds and runs step_chain.cu on a GPU machine (nvcc on the PATH or in
# CUDA_HOME): one-token decode steps' norms and matmuls replayed as a CUDA
# graph, plainly and with programmatic dependent launch.
# Usage: bench/cuda/step-chain.sh [REPS] [prefetch]
# (prefetch: the launch layout in use under each L2 prefetch of step_chain.cu)
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${CUDA_HOME:+$CUDA_HOME/bin/}nvcc
command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
out=${TMPDIR:-/tmp}/step_chain
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
"$NVCC" -O3 --use_fast_math -std=c++17 -arch=sm_90 -o "$out" step_chain.cu
"$out" "${1:-20}" ${2:+"$2"}
