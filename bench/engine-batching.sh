#!/usr/bin/env bash
# Engine batching benchmark (issue 3): throughput at 1/4/16/64 concurrent
# requests and the TTFT of a short request behind a ~2000-token prefill.
# Extra arguments go to the example, e.g. `--threads 2` or `-m model.gguf`.
# Writes bench/results/engine-batching-<date>.md.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# shellcheck source=bench/host.sh
source bench/host.sh

cargo build --release -p mlxr-engine --example engine_bench

out="bench/results/engine-batching-$(date +%Y-%m-%d).md"
mkdir -p bench/results
{
    echo "# Engine batching benchmark, $(date +%Y-%m-%d)"
    echo
    echo "Commit \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates || echo ' (with uncommitted changes under crates/)');" \
        "$(cpu_cores);" \
        "load average (1, 5, 15 min) $(load_avg) before;" \
        "command: \`bench/engine-batching.sh $*\`."
    echo
    cpu_flags_line
    echo
    ./target/release/examples/engine_bench "$@"
    echo
    echo "Load average (1, 5, 15 min) after: $(load_avg)."
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
echo "wrote $out" >&2
