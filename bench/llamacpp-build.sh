#!/usr/bin/env bash
# Builds (or reuses) llama.cpp for the benchmarks: llama-bench comes from
# scripts/llamacpp-reference/build.sh (the pinned llama-cpp-python sdist, the
# same build the correctness references use); llama-server is added to that
# same build directory (same compiler flags, GGML_NATIVE, no web UI).
# Idempotent. Prints the environment (LLAMA_BENCH, LLAMA_SERVER) on stdout.
#
#   eval "$(bench/llamacpp-build.sh)"            llama-bench only
#   eval "$(bench/llamacpp-build.sh --server)"   llama-bench and llama-server
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp"
JOBS="${JOBS:-2}"

"$root/scripts/llamacpp-reference/build.sh" >&2
# shellcheck disable=SC1091
source "$CACHE/env.sh"

LLAMA_SERVER="$LLAMA_BUILD/bin/llama-server"
if [ "${1:-}" = "--server" ] && [ ! -x "$LLAMA_SERVER" ]; then
  CMAKE="$(command -v cmake || echo "$CACHE/venv/bin/cmake")"
  echo "[llamacpp-build] adding llama-server to $LLAMA_BUILD (-j$JOBS; slow on 2 cores)" >&2
  "$CMAKE" -S "$CACHE/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp" -B "$LLAMA_BUILD" -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -Wno-dev >&2
  "$CMAKE" --build "$LLAMA_BUILD" -j "$JOBS" --target llama-server >&2
fi

echo "LLAMA_CPP_COMMIT=$LLAMA_CPP_COMMIT"
echo "LLAMA_BENCH=$LLAMA_BENCH"
[ -x "$LLAMA_SERVER" ] && echo "LLAMA_SERVER=$LLAMA_SERVER"
true
