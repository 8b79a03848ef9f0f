#!/usr/bin/env bash
# Compile dump-activations.cpp against the llama.cpp that build.sh built.
#   scripts/llamacpp-reference/build-dump.sh   -> ${MLXR_CACHE:-~/.cache/mlxr}/llama.cpp/bin-0.3.36/dump-activations
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp"
[ -f "$CACHE/env.sh" ] || "$HERE/build.sh"
# shellcheck disable=SC1091
. "$CACHE/env.sh"
LLAMA="$CACHE/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
OUT="$(dirname "$REFERENCE")/dump-activations"
g++ -std=c++17 -O2 -Wall -Wextra \
  -I "$LLAMA/include" -I "$LLAMA/ggml/include" \
  "$HERE/dump-activations.cpp" -o "$OUT" \
  -L "$LLAMA_BUILD/bin" -lllama -lggml -lggml-base \
  -Wl,-rpath,"$LLAMA_BUILD/bin" -pthread
echo "$OUT"
