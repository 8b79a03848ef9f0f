#!/usr/bin/env bash
# Speculative decoding benchmark (issue 19): one stream (or -c N), the same GGUF file
# and thread count, `mlxr serve` with and without prompt lookup (per-request
# `speculative.*` keys) and `llama-server` without
# and with its n-gram speculation (`--spec-type ngram-simple`, its defaults
# and a setting like ours), on the committed prompt sets
# (bench/prompts/spec-rewrite.jsonl, spec-completion.jsonl). Reports tok/s
# (client wall time and the servers' decode timings), drafted and accepted
# tokens, whether mlxr's text with lookup equals its text without, and the
# ratios; writes bench/results/speculative-<date>.md.
#
#   bench/speculative.sh                                Qwen2.5-Coder-1.5B, 2 threads, 128 tokens
#   bench/speculative.sh -m path/to/model.gguf -k 8 -n 128 -s rewrite -o /tmp/spec.md
#   bench/speculative.sh --no-llama                     mlxr only
#   bench/speculative.sh --isa avx512                   llama.cpp built for AVX-512 (GGML_NATIVE=OFF),
#                                                       mlxr under MLXR_CPU_ISA=avx512
#   bench/speculative.sh --variants "none draft" --llama-variants "none draft"
#                                                       the draft model (-d, default Qwen2.5-Coder-0.5B)
#                                                       instead of prompt lookup
#   bench/speculative.sh --variants "none draft draft-max" --no-llama
#                                                       ngram and draft choose each draft's length by
#                                                       goodput; ngram-max and draft-max always draft k
#   bench/speculative.sh --variants "none draft draft-whole" --no-llama
#                                                       draft-whole: the draft scores every token
#                                                       (--draft-vocab 0), not its 32,768 most frequent
#   bench/speculative.sh -c 16 --no-llama -s rewrite    16 requests in flight (aggregate tok/s; the
#                                                       servers' decode tok/s is then per stream)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh
# shellcheck source=bench/servers.sh
source bench/servers.sh

out="" threads=2 max_tokens=128 k=8 sets="rewrite completion" concurrency=1
variants="none ngram" llama_variants="none ngram-simple ngram-tuned" isa=""
models="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
model="$models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
draft="$models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--threads) threads="$2"; shift 2 ;;
    -n|--max-tokens) max_tokens="$2"; shift 2 ;;
    -k|--draft-max) k="$2"; shift 2 ;;
    -c|--concurrency) concurrency="$2"; shift 2 ;;
    -s|--sets) sets="$2"; shift 2 ;;
    -m|--model) model="$2"; shift 2 ;;
    -d|--draft) draft="$2"; shift 2 ;;
    --variants) variants="$2"; shift 2 ;;
    --llama-variants) llama_variants="$2"; shift 2 ;;
    --no-llama) llama_variants=""; shift ;;
    --isa) isa="$2"; shift 2 ;;
    -o|--out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "missing $model: run scripts/fetch-models.sh qwen-coder" >&2; exit 1; }

mlxr_binary
if [ -n "$isa" ]; then
  eval "$(bench/llamacpp-build.sh --isa "$isa")"
  export MLXR_CPU_ISA="$isa"
elif [ -n "$llama_variants" ]; then
  eval "$(bench/llamacpp-build.sh --server)"
fi

server_scratch

client() {  # url label-prefix set json-out variants...
  local url="$1" set="$2" json="$3"; shift 3
  python3 bench/speculative.py --url "$url" --model bench --prompts "bench/prompts/spec-$set.jsonl" \
    --max-tokens "$max_tokens" --concurrency "$concurrency" "$@" --json-out "$json" >&2
}

load_before="$(load_avg)"
for set in $sets; do
  for variant in $variants; do
    echo "[speculative] $set: mlxr $variant" >&2
    serve_flags=()
    case "$variant" in
      none) label="mlxr"; body='{"speculative.type": "none"}' ;;
      ngram|ngram-max|draft|draft-max|draft-whole)
        type="${variant%-*}" length=goodput
        [ "$variant" = "$type-max" ] && length=max
        if [ "$type" = ngram ]; then
          label="mlxr lookup"
        else
          label="mlxr draft $(basename "$draft")"; serve_flags=(--model-draft "$draft")
          if [ "$variant" = draft-whole ]; then
            label="$label whole-vocabulary head"; serve_flags+=(--draft-vocab 0)
          fi
        fi
        label="$label k<=$k $length"
        body="{\"speculative.type\": \"$type\", \"speculative.n_max\": $k, \"speculative.draft_length\": \"$length\"}" ;;
      *) echo "unknown variant $variant" >&2; exit 2 ;;
    esac
    MLXR_HOME="$work/home-$set-$variant" "$MLXR" serve -m "$model" --name bench -t "$threads" \
      "${serve_flags[@]}" --host 127.0.0.1:18436 > "$work/server.log" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:18436"
    client "http://127.0.0.1:18436" "$set" "$work/$set-mlxr-$variant.json" --variant "$label" "$body"
    curl -s "http://127.0.0.1:18436/metrics" > "$work/$set-mlxr-$variant.metrics" || true
    stop_server
  done
  for spec in $llama_variants; do
    echo "[speculative] $set: llama-server $spec" >&2
    case "$spec" in
      none) flags=(); label="llama-server none" ;;
      ngram-simple) flags=(--spec-type ngram-simple); label="llama-server ngram-simple" ;;
      ngram-tuned) flags=(--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m "$k")
                   label="llama-server ngram-simple n=3 m=$k" ;;
      # -md alone does not speculate in this llama.cpp (the type is read
      # from the draft's metadata): draft-simple with its defaults.
      draft) flags=(--spec-type draft-simple -md "$draft")
             label="llama-server draft-simple $(basename "$draft") (its defaults)" ;;
      *) echo "unknown llama variant $spec" >&2; exit 2 ;;
    esac
    "$LLAMA_SERVER" -m "$model" -t "$threads" -np "$concurrency" -c $((4096 * concurrency)) "${flags[@]}" \
      --host 127.0.0.1 --port 18081 > "$work/server.log" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:18081"
    client "http://127.0.0.1:18081" "$set" "$work/$set-llama-$spec.json" --variant "$label" '{}'
    stop_server
  done
done
load_after="$(load_avg)"

out="${out:-bench/results/speculative-$(date +%Y-%m-%d).md}"
mkdir -p bench/results
{
  streams="one stream"
  [ "$concurrency" = 1 ] || streams="$concurrency streams"
  echo "# Speculative decoding, $streams: mlxr vs llama-server, $(date +%Y-%m-%d)"
  echo
  echo "$built;" \
    "${LLAMA_CPP_COMMIT:+llama.cpp \`$LLAMA_CPP_COMMIT\` ($LLAMA_BUILD_NOTE); }$(cpu_cores);" \
    "load average (1, 5, 15 min) $load_before before, $load_after after;" \
    "${isa:+mlxr under \`MLXR_CPU_ISA=$isa\`; }command: \`bench/speculative.sh ${isa:+--isa $isa }-t $threads -n $max_tokens -k $k -s '$sets' -c $concurrency --variants '$variants' --llama-variants '$llama_variants'\`."
  echo
  cpu_flags_line
  echo
  echo "Model \`$(basename "$model")\`, $threads threads. Each prompt of the set once per variant, $concurrency request(s) at a" \
    "time (/v1/chat/completions, temperature 0, max_tokens $max_tokens), after one untimed warm-up request." \
    "Each server started afresh per variant: \`mlxr serve -t $threads\` (the variant as per-request" \
    "\`speculative.*\` keys), \`llama-server -t $threads -np $concurrency -c $((4096 * concurrency))\` (speculation is a launch flag there)." \
    "e2e tok/s: all completion tokens over all client wall time (prompt included); decode tok/s: the servers'" \
    "own \`timings\` (first to last token)."
  echo
  python3 - "$work" "$sets" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "bench")
from speculative import draft_positions, summary
work, sets = sys.argv[1], sys.argv[2].split()
for s in sets:
    runs = {}
    for f in sorted(glob.glob(os.path.join(work, f"{s}-*.json"))):
        runs.update(json.load(open(f)))
    table = summary(runs)
    print(f"## {s} prompts (bench/prompts/spec-{s}.jsonl)\n")
    print("| variant | requests | tokens | e2e tok/s | decode tok/s | drafted | accepted | acceptance |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, v in table.items():
        print(f"| {label} | {v['requests']} | {v['tokens']} | {v['e2e_tps']:.2f} | {v['decode_tps']:.2f} | "
              f"{v['draft_n']} | {v['draft_n_accepted']} | {v['acceptance']:.2f} |")
    for f in sorted(glob.glob(os.path.join(work, f"{s}-mlxr-*.metrics"))):
        lengths, positions = draft_positions(open(f).read())
        if not lengths:
            continue
        variant = os.path.basename(f)[len(s) + 6:-len(".metrics")]
        print(f"\nmlxr {variant}, from its /metrics (the warm-up request included): drafts by length "
              + ", ".join(f"k={k}: {n}" for k, n in lengths.items())
              + "; share of the drafts reaching position i whose token i stood: "
              + ", ".join(f"{i}: {a / r:.2f} ({a}/{r})" for i, (a, r) in positions.items() if r))
    for kind in ("lookup", "draft"):
        ours = [k for k in table if k.startswith(f"mlxr {kind}")]
        if "mlxr" not in table or not ours:
            continue
        plain = runs["mlxr"]
        for o in ours:
            spec = runs[o]
            same = sum(a["text"] == b["text"] for a, b in zip(plain, spec))
            print(f"\nmlxr's text with {o[5:]} equals its text without on {same} of {len(plain)} prompts.")
            print(f"\n**{o} / mlxr: {table[o]['e2e_tps'] / table['mlxr']['e2e_tps']:.2f}× e2e, "
                  f"{table[o]['decode_tps'] / table['mlxr']['decode_tps']:.2f}× decode**")
            prefix = "llama-server ngram" if kind == "lookup" else "llama-server draft"
            llama_spec = {k: v for k, v in table.items() if k.startswith(prefix)}
            if llama_spec:
                best = max(llama_spec, key=lambda k: llama_spec[k]["e2e_tps"])
                print(f"\n**{o} / {best} (llama.cpp's faster setting of this kind here): "
                      f"{table[o]['e2e_tps'] / table[best]['e2e_tps']:.2f}× e2e, "
                      f"{table[o]['decode_tps'] / table[best]['decode_tps']:.2f}× decode**")
        if "llama-server none" in table:
            print(f"\nmlxr / llama-server without speculation: "
                  f"{table['mlxr']['e2e_tps'] / table['llama-server none']['e2e_tps']:.2f}× e2e")
    print()
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
echo "wrote $out" >&2
