#!/usr/bin/env bash
# gRPC against SSE streaming (issue 22): `mlxr serve` on SmolLM2, C streams
# of N tokens through mlxr.v1.Inference/Generate and through
# /v1/completions (stream), rounds alternating (bench/grpc_vs_sse.py says how).
# Writes bench/results/grpc-vs-sse-<date>.md (or -o FILE).
#
#   bench/grpc-vs-sse.sh                         16 streams x 128 tokens, 2 threads, 3 rounds each
#   bench/grpc-vs-sse.sh -c 16 -n 256 -r 5 -o /tmp/g.md
#   bench/grpc-vs-sse.sh --channels 16        one gRPC connection a stream, as SSE has
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh
# shellcheck source=bench/servers.sh
source bench/servers.sh

models_dir="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
threads=2 streams=16 tokens=128 rounds=3 channels=1 out=""
model="$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--threads) threads="$2"; shift 2 ;;
    -c|--streams) streams="$2"; shift 2 ;;
    -n|--tokens) tokens="$2"; shift 2 ;;
    -r|--rounds) rounds="$2"; shift 2 ;;
    --channels) channels="$2"; shift 2 ;;
    -m|--model) model="$2"; shift 2 ;;
    -o|--out) out="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
out="${out:-bench/results/grpc-vs-sse-$(date +%F).md}"

venv="${MLXR_CACHE:-$HOME/.cache/mlxr}/bench-venv"
if ! "$venv/bin/python" -c 'import grpc, grpc_tools, httpx' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check httpx grpcio grpcio-tools
fi

mlxr_binary
server_scratch
port=18391
name="$(basename "$model" .gguf)"
load_before="$(load_avg)"
"$MLXR" serve -m "$model" --name "$name" --threads "$threads" --max-num-seqs "$streams" \
  --host "127.0.0.1:$port" --home "$work/home" > "$work/server.log" 2>&1 &
server_pid=$!
wait_ready "http://127.0.0.1:$port"
rows="$("$venv/bin/python" bench/grpc_vs_sse.py --host "127.0.0.1:$port" --model "$name" \
  -c "$streams" -n "$tokens" -r "$rounds" --channels "$channels")"
stop_server
echo "$rows"

{
  echo "# Streaming through gRPC vs SSE ($(date +%F))"
  echo
  echo "- Host: $(cpu_cores); load before: $load_before; flags: $(cpu_flags | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx_vnni|amx_int8)$' | tr '\n' ' ')"
  echo "- Binary: $built; \`mlxr serve --threads $threads --max-num-seqs $streams\`"
  echo "- $streams concurrent streams of $tokens tokens (greedy, the same raw prompt on both), $rounds rounds"
  echo "  per protocol after one warm-up round each, alternating; clients: Python grpc.aio ($channels channel(s)) and httpx"
  echo "  (\`bench/grpc_vs_sse.py\`). Gaps: between a stream's consecutive token messages as the client sees them."
  echo
  echo "| model | protocol | output tok/s | gap p50 (ms) | gap p99 (ms) | first message p50 (ms) |"
  echo "|---|---|---|---|---|---|"
  echo "$rows"
} > "$out"
echo "wrote $out"
