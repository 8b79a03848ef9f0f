#!/usr/bin/env bash
# `mlxr bench` next to `llama-bench` (issue 7): the same GGUF files, prompt and
# generation lengths, thread count and number of runs. The two tools take
# turns: each round runs both once (-r 1, each with its own warm-up), the
# order alternating from round to round, so a burst of load on this shared
# machine hits both. Prints a Markdown table with ours/llama.cpp ratios and
# writes it to bench/results/side-by-side-<date>.md.
#
#   bench/llamacpp-side-by-side.sh                      2 threads, 5 rounds, pp512 + tg128
#   bench/llamacpp-side-by-side.sh -t 1 -r 3 -p 128 -n 32 -o /tmp/t1.md path/to/other.gguf
#   bench/llamacpp-side-by-side.sh --isa avx2 -d 0,512  one x86 instruction set on both sides:
#                                      llama.cpp built for it (GGML_NATIVE=OFF), mlxr under
#                                      MLXR_CPU_ISA; pp and tg also after 512 tokens of context
#   bench/llamacpp-side-by-side.sh -d 0,512 ~/.cache/mlxr/models/*.gguf
#                                      on ARM (Apple Silicon, Graviton): no --isa, so NEON
#                                      on both sides (llama.cpp's native build); nobody has
#                                      run it on ARM hardware yet
#   MLXR_BASE_BIN=/path/to/old/mlxr bench/llamacpp-side-by-side.sh
#                                      also an earlier mlxr build in the same rounds
#                                      (a "before" column and after/before ratios)
#
# llama.cpp comes from scripts/llamacpp-reference/build.sh (the llama-cpp-python
# sdist pinned there), via bench/llamacpp-build.sh.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh
# shellcheck source=bench/servers.sh
source bench/servers.sh

out="" threads=2 reps=5 n_prompt=512 n_gen=128 depths=0 isa="" models=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--threads) threads="$2"; shift 2 ;;
    -r|--reps) reps="$2"; shift 2 ;;
    -p) n_prompt="$2"; shift 2 ;;
    -n) n_gen="$2"; shift 2 ;;
    -d) depths="$2"; shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    -o|--out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done
dir="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
if [ ${#models[@]} -eq 0 ]; then
  models=("$dir/SmolLM2-135M-Instruct.Q4_1.gguf" "$dir/gemma-3-270m-q4_k_m.gguf")
fi
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "missing $m: run scripts/fetch-models.sh" >&2; exit 1; }
done

mlxr_binary
if [ -n "$isa" ]; then
  eval "$(bench/llamacpp-build.sh --isa "$isa")"
  export MLXR_CPU_ISA="$isa"
else
  eval "$(bench/llamacpp-build.sh)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
load_before="$(load_avg)"
for m in "${models[@]}"; do
  name="$(basename "$m" .gguf)"
  for round in $(seq 1 "$reps"); do
    echo "[side-by-side] $name round $round/$reps (load $(load_avg | cut -d' ' -f1))" >&2
    llama() {
      "$LLAMA_BENCH" -m "$m" -p "$n_prompt" -n "$n_gen" -d "$depths" -t "$threads" -r 1 -o json \
        > "$work/llama.cpp@$name@$round.json" 2> "$work/llama.log"
    }
    ours() {
      "$MLXR" bench -m "$m" -p "$n_prompt" -n "$n_gen" -d "$depths" -t "$threads" -r 1 -o json \
        > "$work/mlxr@$name@$round.json"
    }
    base() {
      [ -z "${MLXR_BASE_BIN:-}" ] || "$MLXR_BASE_BIN" bench -m "$m" -p "$n_prompt" -n "$n_gen" \
        -d "$depths" -t "$threads" -r 1 -o json > "$work/before@$name@$round.json"
    }
    if [ $((round % 2)) -eq 1 ]; then llama; base; ours; else ours; base; llama; fi
  done
done
load_after="$(load_avg)"

out="${out:-bench/results/side-by-side-$(date +%Y-%m-%d).md}"
mkdir -p bench/results
{
  echo "# mlxr bench vs llama-bench, $(date +%Y-%m-%d)"
  echo
  echo "$built;" \
    "llama.cpp \`$LLAMA_CPP_COMMIT\` (llama-cpp-python sdist, $LLAMA_BUILD_NOTE);" \
    "${isa:+mlxr under \`MLXR_CPU_ISA=$isa\`;}" \
    "$(cpu_cores);" \
    "load average (1, 5, 15 min) $load_before before, $load_after after;" \
    "command: \`bench/llamacpp-side-by-side.sh ${isa:+--isa $isa }-t $threads -r $reps -p $n_prompt -n $n_gen -d $depths\`."
  [ -z "${MLXR_BASE_BIN:-}" ] || echo "Before: \`$MLXR_BASE_BIN\`${BASE_NOTE:+ ($BASE_NOTE)}, run in the same rounds."
  echo
  cpu_flags_line
  echo
  echo "$reps rounds; in each, both tools run once (\`-r 1\` after their own warm-up), taking turns" \
    "to go first. t/s is the mean ± sample standard deviation over rounds; the ratio is ours / llama.cpp" \
    "(above 1: mlxr is faster). Both with their defaults otherwise: f16 KV cache; llama-bench" \
    "\`-b 2048 -ub 512 -fa auto\`, \`mlxr bench -b 512\` (the engine's token budget per step)."
  echo
  python3 - "$work" <<'PY'
import glob, json, os, statistics, sys
work = sys.argv[1]
runs = {}  # (model, tool, test) -> [t/s]
models = []
for path in sorted(glob.glob(os.path.join(work, "*.json"))):
    tool, model, _ = os.path.basename(path)[:-5].split("@")
    if model not in models:
        models.append(model)
    for t in json.load(open(path)):
        test = f"pp{t['n_prompt']}" if t["n_prompt"] else f"tg{t['n_gen']}"
        if t.get("n_depth"):
            test += f" @ d{t['n_depth']}"
        runs.setdefault((model, tool, test), []).extend(t["samples_ts"])
        threads = t["n_threads"]
def fmt(xs):
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):.2f} ± {sd:.2f}"
before = any(k[1] == "before" for k in runs)
if before:
    print("| model | threads | test | mlxr t/s | before t/s | after/before | llama.cpp t/s | ratio |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
else:
    print("| model | threads | test | mlxr t/s | llama.cpp t/s | ratio |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
for model in models:
    def order(s):
        depth = int(s.split(" @ d")[1]) if " @ d" in s else 0
        return (depth, s[:2] != "pp", s)
    tests = sorted({k[2] for k in runs if k[0] == model}, key=order)
    for test in tests:
        ours, ref = runs.get((model, "mlxr", test)), runs.get((model, "llama.cpp", test))
        if not ours or not ref:
            continue
        ratio = statistics.mean(ours) / statistics.mean(ref)
        old = runs.get((model, "before", test))
        if before and old:
            vs = statistics.mean(ours) / statistics.mean(old)
            print(f"| {model} | {threads} | {test} | {fmt(ours)} | {fmt(old)} | {vs:.2f}× | {fmt(ref)} | {ratio:.2f}× |")
        else:
            print(f"| {model} | {threads} | {test} | {fmt(ours)} | {fmt(ref)} | {ratio:.2f}× |")
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
echo "wrote $out" >&2
