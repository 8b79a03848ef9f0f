#!/usr/bin/env bash
# Where a decode step's time goes on the GPU machine: `mlxr bench --device
# cuda` on a random-weight model (default llama8b-q4_k_m) under Nsight
# Systems when the machine has it (kernel and CUDA API summaries), and the
# GPU's utilization sampled every 50 ms during a plain run (near 100%: the
# kernels are the bound; far below: the host is). Run after
# scripts/gpu-tests.sh has unpacked the binary (any GPU_STAGES, even none):
#
#   GPU_STAGES=none GPU_MODELS=llama8b-q4_k_m scripts/gpu-tests.sh; scripts/gpu-profile.sh
set -uo pipefail
WORK=${GPU_WORK:-/tmp/mlxr-gpu}
OUT=${OUT:-/tmp/gpu-out}
MODEL=$WORK/models/${1:-llama8b-q4_k_m}.gguf
mkdir -p "$OUT"
libs=$(python3 -c '
import glob, os, site
dirs = {os.path.dirname(p) for b in site.getsitepackages() for n in ("libcublas.so.*", "libcublasLt.so.*", "libcurand.so.*", "libcudart.so.*")
        for p in glob.glob(os.path.join(b, "nvidia", "**", n), recursive=True)}
print(":".join(sorted(dirs)))')
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bench=("$WORK/bin/mlxr" bench --device cuda -m "$MODEL" -p 16 -n 128 -r 1)

echo "== GPU utilization during ${bench[*]}"
nvidia-smi --query-gpu=utilization.gpu,clocks.sm --format=csv,noheader -lms 50 >"$OUT/util.csv" &
smi=$!
"${bench[@]}" 2>&1 | tail -4
kill "$smi"
sort -t, -k1 -n "$OUT/util.csv" | awk -F, '{u[NR]=$1+0} END {printf "samples %d, median %d%%, p90 %d%%\n", NR, u[int(NR/2)+1], u[int(NR*0.9)+1]}'

nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [[ -n $nsys ]]; then
    echo "== $nsys profile"
    "$nsys" profile -o "$OUT/decode" --force-overwrite true "${bench[@]}" >/dev/null 2>&1
    "$nsys" stats -q --report cuda_gpu_kern_sum,cuda_api_sum --format table "$OUT/decode.nsys-rep" 2>&1 |
        cut -c1-220 | head -80
    rm -f "$OUT"/decode.*
else
    echo "== no nsys on this machine"
fi
