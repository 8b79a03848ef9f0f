#!/usr/bin/env bash
# Long run of the API load test (tests/api/test_load.py): 64 concurrent
# clients against one `mlxr serve` on SmolLM2 + all-MiniLM for 10 minutes,
# with the test's assertions (no 5xx, streams end cleanly, engine drained,
# heap in use +<1% and RSS +<10% from the drained state after the warm-up
# to the drained end). Writes bench/results/load-<date>.md with
# the summary, the CPU (lscpu), the load average and the commit.
#
#   bench/load.sh                         600 s, 64 clients
#   bench/load.sh -s 300 -c 32 -t 1 -o /tmp/load.md   (-t: the server's threads)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

seconds=600 clients=64 threads="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -s|--seconds) seconds="$2"; shift 2 ;;
    -c|--clients) clients="$2"; shift 2 ;;
    -t|--threads) threads="$2"; shift 2 ;;
    -o|--out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

# MLXR_BIN: an mlxr binary built elsewhere; otherwise the working tree is built.
if [ -n "${MLXR_BIN:-}" ]; then
  built="mlxr binary \`$MLXR_BIN\`${BENCH_NOTE:+ ($BENCH_NOTE)}, test from commit \`$(git rev-parse --short HEAD)\`"
else
  cargo build --release -p mlxr >&2
  export MLXR_BIN="$root/target/release/mlxr"
  built="commit \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates || echo ' (with uncommitted changes under crates/)')"
fi
venv="${MLXR_API_VENV:-$HOME/.cache/mlxr/api-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/api/requirements.txt

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
status=0
MLXR_LOAD_SECONDS="$seconds" MLXR_LOAD_CLIENTS="$clients" MLXR_LOAD_THREADS="$threads" MLXR_LOAD_REPORT="$work/load.json" \
  "$venv/bin/python" -m pytest -q tests/api/test_load.py 2>&1 | tee "$work/pytest.log" >&2 || status=$?
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
[ -f "$work/load.json" ] || { echo "the load test wrote no report" >&2; exit 1; }

out="${out:-bench/results/load-$(date +%Y-%m-%d).md}"
mkdir -p bench/results
{
  echo "# Load test: $clients clients for $seconds s against mlxr serve, $(date +%Y-%m-%d)"
  echo
  echo "$built; load average (1, 5, 15 min) $load_before before, $load_after after;" \
    "command: \`bench/load.sh -s $seconds -c $clients${threads:+ -t $threads}\`; test result: $([ $status = 0 ] && echo passed || echo FAILED)."
  echo
  echo "CPU: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p');" \
    "flags: $(lscpu | sed -n 's/^Flags: *//p')"
  echo
  "$venv/bin/python" - "$work/load.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"Server threads (-t): {s['server_threads']}. "
      f"{s['requests_per_s']} requests/s, {s['generated_tokens']} generated tokens, "
      f"{s['tokens_per_s']} tokens/s over {s['seconds']} s (warm-up {s['warmup_s']} s).")
print()
print("| request | count | statuses |")
print("| --- | ---: | --- |")
for kind in sorted(s["requests"]):
    statuses = ", ".join(f"{c}: {n}" for c, n in sorted(s["statuses"].get(kind, {}).items()))
    print(f"| {kind} | {s['requests'][kind]} | {statuses} |")
print()
print("Stream endings: " + ", ".join(f"{k} {v}" for k, v in sorted(s["endings"].items())) + ".")
warm, end = s["memory_after_warmup"], s["memory_end"]
print(f"Drained after the warm-up / at the end (MiB): RSS {warm['rss'] >> 20} / {end['rss'] >> 20} "
      f"({s['rss_growth']:+.2%}, limit 10%), heap in use {warm['heap'] >> 20} / {end['heap'] >> 20} "
      f"({s['heap_growth']:+.3%}, limit 1%).")
print("RSS (MiB) every 10 s: " + " ".join(str(kib // 1024) for _, kib in s["rss_samples_kib"]) + ".")
print("Gauges after the run: " + ", ".join(f"`{k}` {v}" for k, v in s["gauges_after"].items()) + ".")
if s["failures"]:
    print()
    print("Failures:")
    for f in s["failures"]:
        print(f"- {f}")
PY
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
echo "wrote $out" >&2
exit "$status"
