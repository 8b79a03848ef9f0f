#!/usr/bin/env bash
# SmolLM2-135M as FP8 and NF4 checkpoints against its Q8_0 and Q4_0 GGUFs
# on the CPU, and as F32, BF16 and F16 folders: `mlxr bench` pp512 and
# tg128 on each, same threads, one run. All are made here from the fetched
# Q4_1 GGUF: the float folders by `mlxr convert`, FP8/NF4 from the f32 one
# by bench/fp8_nf4_folders.py, Q8_0/Q4_0 by `mlxr quantize` (llama.cpp's
# per-tensor rules: Q4_0 keeps a Q6_K output).
#
#   MLXR_BIN=target/release/mlxr bench/fp8-nf4.sh [-o RESULT.md]
#   BENCH_MODELS="f32 bf16" bench/fp8-nf4.sh    only those (of q8_0.gguf fp8 q4_0.gguf nf4 f32 bf16 f16)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MLXR=${MLXR_BIN:-$ROOT/target/release/mlxr}
CACHE=${MLXR_CACHE:-$HOME/.cache/mlxr}
SRC=$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf
THREADS=${THREADS:-2}
REPS=${REPS:-5}
OUT=/dev/stdout
[[ ${1:-} == -o ]] && OUT=$2
W=$(mktemp -d /tmp/fp8-nf4-bench.XXXX)
trap 'rm -rf "$W"' EXIT
# shellcheck source=bench/host.sh
source "$ROOT/bench/host.sh"

VENV=$CACHE/fp8-bench-venv
if [[ ! -x $VENV/bin/python ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q numpy==2.4.6 ml_dtypes==0.7.0 safetensors==0.8.0
fi
"$MLXR" convert "$SRC" "$W/f32" >/dev/null
"$MLXR" convert "$SRC" "$W/bf16" --outtype bf16 >/dev/null
"$MLXR" convert "$SRC" "$W/f16" --outtype f16 >/dev/null
"$VENV/bin/python" "$ROOT/bench/fp8_nf4_folders.py" "$W/f32" "$W/fp8" "$W/nf4"
"$MLXR" quantize "$W/f32" "$W/q8_0.gguf" --type q8_0 >/dev/null 2>&1
"$MLXR" quantize "$W/f32" "$W/q4_0.gguf" --type q4_0 >/dev/null 2>&1

{
    echo "# SmolLM2-135M: FP8 and NF4 checkpoints against Q8_0 and Q4_0 GGUFs, float folders (CPU)"
    echo
    echo "$(date -u +%F) · commit $(git -C "$ROOT" rev-parse --short HEAD) · $THREADS threads, $REPS runs"
    echo
    echo "- Host: $(cpu_cores); load before: $(load_avg)"
    echo "- $(cpu_flags_line)"
    echo
    for m in ${BENCH_MODELS:-q8_0.gguf fp8 q4_0.gguf nf4 f32 bf16 f16}; do
        echo "## $m ($(du -sh "$W/$m" | cut -f1))"
        echo
        "$MLXR" bench -m "$W/$m" -p 512 -n 128 -t "$THREADS" -r "$REPS" --device cpu 2>&1 | grep -E '^\|'
        echo
    done
} | tee "$OUT"
