#!/usr/bin/env bash
# Structured output benchmark (issue 20): `mlxr serve` on each model, decode
# tok/s with a JSON-schema constraint against without at 1 and 16 streams,
# and the first token of a 50-property schema (bench/structured.py says
# how). Writes bench/results/structured-<date>.md (or -o FILE).
#
#   bench/structured.sh                                   SmolLM2 and Qwen2.5-Coder-0.5B, 2 threads
#   bench/structured.sh -t 2 -n 128 -c "1 16" -o /tmp/s.md
#   bench/structured.sh --grammar-masks ahead   masks computed while the forward
#                                               pass runs (serve's default on the CPU: lazy)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh
# shellcheck source=bench/servers.sh
source bench/servers.sh

models_dir="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
threads=2 max_tokens=128 concurrency="1 16" out="" masks=auto
models="$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf $models_dir/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--threads) threads="$2"; shift 2 ;;
    -n|--max-tokens) max_tokens="$2"; shift 2 ;;
    -c|--concurrency) concurrency="$2"; shift 2 ;;
    -m|--models) models="$2"; shift 2 ;;
    -o|--out) out="$2"; shift 2 ;;
    --grammar-masks) masks="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out="${out:-bench/results/structured-$(date +%F).md}"

mlxr_binary
server_scratch
port=18390
rows=()
for model in $models; do
  name="$(basename "$model" .gguf)"
  "$MLXR" serve -m "$model" --name "$name" --threads "$threads" --max-num-seqs 16 --grammar-masks "$masks" \
    --host "127.0.0.1:$port" --home "$work/home" > "$work/server.log" 2>&1 &
  server_pid=$!
  wait_ready "http://127.0.0.1:$port"
  # shellcheck disable=SC2086
  while IFS= read -r line; do rows+=("$line"); echo "$line"; done < <(
    python3 bench/structured.py --url "http://127.0.0.1:$port" --model "$name" \
      -c $concurrency -n "$max_tokens")
  stop_server
done

{
  echo "# Structured output: decode with a JSON-schema constraint vs without ($(date +%F))"
  echo
  echo "- Host: $(cpu_cores); load before: $(load_avg); flags: $(cpu_flags | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx_vnni|amx_int8)$' | tr '\n' ' ')"
  echo "- Binary: $built; \`mlxr serve --threads $threads --max-num-seqs 16 --grammar-masks $masks\`"
  echo "- Each request: max_tokens $max_tokens, greedy; free ones with ignore_eos, constrained ones under a"
  echo "  schema that cannot close before max_tokens (an array of >= 200 strings of <= 24 characters)."
  echo "  Output tok/s = completion tokens / wall time; per stream: the server's median decode tok/s."
  echo
  echo "| model | what | | | | |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} > "$out"
echo "wrote $out"
