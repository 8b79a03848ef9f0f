#!/usr/bin/env bash
# Builds and runs norm_shapes.cu on a GPU machine (nvcc on the PATH or in
# CUDA_HOME): the one-token add + RMSNorm + Q8_K launch under different
# block shapes, 64 launches in a chain replayed as a CUDA graph.
# Usage: bench/cuda/norm-shapes.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${CUDA_HOME:+$CUDA_HOME/bin/}nvcc
command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
out=${TMPDIR:-/tmp}/norm_shapes
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
"$NVCC" -O3 --use_fast_math -std=c++17 -arch=sm_90 -o "$out" norm_shapes.cu
"$out" "${1:-50}"
