#!/usr/bin/env bash
# Serving benchmark driver (issue 7): `mlxr serve` and `llama-server -np N` on
# the same GGUF file and thread count, one after the other, each loaded with
# N concurrent streaming clients (bench/serving.py) on /v1/chat/completions,
# max_tokens 128 with ignore_eos. Rounds alternate which server goes first;
# each round starts the server afresh. Prints a Markdown table and the
# mlxr / llama-server output tok/s ratio, and writes
# bench/results/serving-<date>.md.
#
#   bench/serving.sh                        SmolLM2, 16 streams, 2 threads, 2 rounds
#   bench/serving.sh -c 4 -t 1 -r 1 -m path/to/model.gguf -o /tmp/serving.md
#   bench/serving.sh --isa avx2             llama-server built for AVX2 (GGML_NATIVE=OFF),
#                                           mlxr under MLXR_CPU_ISA=avx2
#   bench/serving.sh --mlxr-args "--spec-type ngram" --compare-plain
#                                           mlxr with these serve flags against mlxr
#                                           without them (instead of llama-server)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh
# shellcheck source=bench/servers.sh
source bench/servers.sh

out="" streams=16 threads=2 rounds=2 max_tokens=128 per_client=2 ctx_per_slot=512 isa="" mlxr_args="" compare_plain=0
model="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
while [ $# -gt 0 ]; do
  case "$1" in
    -c|--streams) streams="$2"; shift 2 ;;
    -t|--threads) threads="$2"; shift 2 ;;
    -r|--rounds) rounds="$2"; shift 2 ;;
    -n|--max-tokens) max_tokens="$2"; shift 2 ;;
    --requests-per-client) per_client="$2"; shift 2 ;;
    -m|--model) model="$2"; shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    --mlxr-args) mlxr_args="$2"; shift 2 ;;
    --compare-plain) compare_plain=1; shift ;;
    -o|--out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "missing $model: run scripts/fetch-models.sh" >&2; exit 1; }

mlxr_binary
[ -z "$isa" ] || export MLXR_CPU_ISA="$isa"
# llama-server only when it is the other side.
if [ "$compare_plain" = 1 ]; then
  llama_note=""
elif [ -n "$isa" ]; then
  eval "$(bench/llamacpp-build.sh --isa "$isa")"
  llama_note="llama.cpp \`$LLAMA_CPP_COMMIT\` ($LLAMA_BUILD_NOTE); "
else
  eval "$(bench/llamacpp-build.sh --server)"
  llama_note="llama.cpp \`$LLAMA_CPP_COMMIT\` ($LLAMA_BUILD_NOTE); "
fi
venv="${MLXR_CACHE:-$HOME/.cache/mlxr}/bench-venv"
if ! "$venv/bin/python" -c 'import httpx' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet httpx >&2
fi
PY="$venv/bin/python"

server_scratch

run_mlxr() {  # round [plain]
  local port=18435 label="mlxr${mlxr_args:+ $mlxr_args}" args=($mlxr_args)
  if [ "${2:-}" = plain ]; then label="mlxr" args=(); fi
  MLXR_HOME="$work/home" "$MLXR" serve -m "$model" --name bench "${args[@]}" \
    -t "$threads" --max-num-seqs "$streams" --host "127.0.0.1:$port" > "$work/server.log" 2>&1 &
  server_pid=$!
  wait_ready "http://127.0.0.1:$port"
  "$PY" bench/serving.py --url "http://127.0.0.1:$port" --model bench --label "$label" \
    -c "$streams" --requests-per-client "$per_client" --max-tokens "$max_tokens" \
    --json-out "$work/mlxr-${2:-args}-$1.json" >&2
  stop_server
}

run_llama() {  # round
  local port=18080
  "$LLAMA_SERVER" -m "$model" -np "$streams" -t "$threads" -c $((streams * ctx_per_slot)) \
    --host 127.0.0.1 --port "$port" > "$work/server.log" 2>&1 &
  server_pid=$!
  wait_ready "http://127.0.0.1:$port"
  "$PY" bench/serving.py --url "http://127.0.0.1:$port" --model bench --label "llama-server -np $streams" \
    -c "$streams" --requests-per-client "$per_client" --max-tokens "$max_tokens" \
    --json-out "$work/llama-$1.json" >&2
  stop_server
}

load_before="$(load_avg)"
for round in $(seq 1 "$rounds"); do
  echo "[serving] round $round/$rounds (load $(load_avg | cut -d' ' -f1))" >&2
  if [ "$compare_plain" = 1 ]; then
    if [ $((round % 2)) -eq 1 ]; then run_mlxr "$round"; run_mlxr "$round" plain; else run_mlxr "$round" plain; run_mlxr "$round"; fi
  elif [ $((round % 2)) -eq 1 ]; then run_mlxr "$round"; run_llama "$round"; else run_llama "$round"; run_mlxr "$round"; fi
done
load_after="$(load_avg)"

out="${out:-bench/results/serving-$(date +%Y-%m-%d).md}"
mkdir -p bench/results
{
  if [ "$compare_plain" = 1 ]; then
    echo "# Serving benchmark: mlxr serve $mlxr_args vs mlxr serve, $(date +%Y-%m-%d)"
  else
    echo "# Serving benchmark: mlxr serve vs llama-server, $(date +%Y-%m-%d)"
  fi
  echo
  echo "$built;" \
    "$llama_note${isa:+mlxr under \`MLXR_CPU_ISA=$isa\`; }$(cpu_cores);" \
    "load average (1, 5, 15 min) $load_before before, $load_after after;" \
    "command: \`bench/serving.sh ${isa:+--isa $isa }${mlxr_args:+--mlxr-args '$mlxr_args' }$([ "$compare_plain" = 1 ] && echo '--compare-plain ')-c $streams -t $threads -r $rounds -n $max_tokens\`."
  echo
  cpu_flags_line
  echo
  echo "Model \`$(basename "$model")\`. $streams streaming clients, each sending $per_client requests back to back" \
    "(/v1/chat/completions, distinct short prompts, temperature 0, max_tokens $max_tokens, ignore_eos), after one" \
    "untimed warm-up request; $rounds rounds, each server started afresh per round, the order alternating." \
    "\`mlxr serve -t $threads --max-num-seqs $streams\` (defaults otherwise: 512 tokens per step, 1 GiB f16 KV);" \
    "$([ "$compare_plain" = 1 ] && echo "Against the same \`mlxr serve\` with \`$mlxr_args\`." || echo "\`llama-server -np $streams -t $threads -c $((streams * ctx_per_slot))\` (defaults otherwise).")" \
    "tok/s: mean ± sd over rounds; latencies pooled over all rounds."
  echo
  "$PY" - "$work" "$mlxr_args" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "bench")
from serving import summarize
runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")), reverse=True)]
means = summarize(runs)
ours = [v for k, v in means.items() if k == "mlxr"]
ref = [v for k, v in means.items() if k.startswith("llama-server")]
with_args = [v for k, v in means.items() if sys.argv[2] and k == f"mlxr {sys.argv[2]}"]
if ours and ref:
    print()
    print(f"**Output tok/s ratio, mlxr / llama-server: {ours[0] / ref[0]:.2f}×**")
elif ours and with_args:
    print()
    print(f"**Output tok/s ratio, mlxr {sys.argv[2]} / mlxr: {with_args[0] / ours[0]:.2f}×**")
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
echo "wrote $out" >&2
