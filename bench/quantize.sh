#!/usr/bin/env bash
# `mlxr quantize` against llama.cpp's `llama-quantize` (issue 21): the same
# F16 input (made from the model with llama-quantize itself), the same
# types and thread count, -r runs of each, alternating; reports the median
# wall time of each tool, the ratio (llama-quantize / mlxr: above 1, mlxr is
# faster) and whether the two output files are byte-identical. Writes
# bench/results/quantize-<date>.md.
#
#   bench/quantize.sh                                 SmolLM2-135M, 2 threads, 3 runs
#   bench/quantize.sh -m model.gguf -t 4 -r 5 --types "Q4_K_M Q8_0" -o /tmp/q.md
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh
# shellcheck source=bench/servers.sh
source bench/servers.sh

out="" threads=2 runs=3 types="Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 Q3_K_M Q2_K"
model="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    -r) runs="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
out="${out:-bench/results/quantize-$(date -u +%F).md}"

mlxr_binary
"$root/scripts/llamacpp-reference/build.sh" >&2
# shellcheck disable=SC1091
source "${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp/env.sh"
quantize="$LLAMA_BUILD/bin/llama-quantize"
if [ ! -x "$quantize" ]; then
  cmake="$(command -v cmake || echo "${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp/venv/bin/cmake")"
  "$cmake" --build "$LLAMA_BUILD" -j "${JOBS:-2}" --target llama-quantize >&2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
input="$work/input-f16.gguf"
"$quantize" --allow-requantize "$model" "$input" F16 "$threads" > /dev/null 2>&1

seconds() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

load_before="$(load_avg)"
rows=""
for ty in $types; do
  ll="" ml="" same=yes
  for _ in $(seq "$runs"); do
    rm -f "$work/a.gguf" "$work/b.gguf"
    ll="$ll $(seconds "$quantize" "$input" "$work/a.gguf" "$ty" "$threads")"
    ml="$ml $(seconds "$MLXR" quantize "$input" "$work/b.gguf" --type "$ty" --threads "$threads")"
    cmp -s "$work/a.gguf" "$work/b.gguf" || same=no
  done
  l="$(printf '%.2f' "$(echo "$ll" | median)")" m="$(printf '%.2f' "$(echo "$ml" | median)")"
  ratio="$(printf '%.2f' "$(echo "scale=4; $l / $m" | bc)")"
  rows="$rows| $ty | $l | $m | **${ratio}×** | $same |
"
  echo "$ty: llama-quantize $l s, mlxr $m s, ${ratio}x, identical: $same" >&2
done

{
  echo "# \`mlxr quantize\` vs \`llama-quantize\` ($(date -u +%F))"
  echo
  echo "- Host: $(cpu_cores); load before: $load_before, after: $(load_avg); flags: $(cpu_flags | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx_vnni|avx512_vnni|amx_int8)$' | tr '\n' ' ')"
  echo "- Binary: $built; llama.cpp $LLAMA_CPP_COMMIT (\`$quantize\`)"
  echo "- Input: $(basename "$model") converted to F16 by llama-quantize; $threads threads each; median of $runs runs (alternating), wall time of the whole command"
  echo
  echo "| type | llama-quantize (s) | mlxr quantize (s) | llama / mlxr | output byte-identical |"
  echo "|---|---:|---:|---:|---|"
  printf '%s' "$rows"
} > "$out"
echo "wrote $out" >&2
