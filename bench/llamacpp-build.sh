#!/usr/bin/env bash
# Builds (or reuses) llama.cpp for the benchmarks, from the pinned
# llama-cpp-python sdist of scripts/llamacpp-reference/build.sh.
#
# Without --isa: llama-bench of that script's build (GGML_NATIVE, the same
# build the correctness references use); --server adds llama-server to it.
# With --isa: a CPU build of its own for one x86 instruction set
# (GGML_NATIVE=OFF, the matching GGML_* flags; llama-bench and llama-server),
# to run side by side with mlxr under the same MLXR_CPU_ISA:
#   avx2     AVX2 + FMA + F16C + BMI2 (Zen 2/3, Intel before Alder Lake)
#   avxvnni  the above + AVX-VNNI (Intel Alder Lake and later, without AVX-512)
#   avx512   the above + AVX-512 F/BW/VL/DQ, VBMI, VNNI, BF16 (no AMX)
# Idempotent. Prints the environment (LLAMA_BENCH, LLAMA_SERVER) on stdout.
#
#   eval "$(bench/llamacpp-build.sh)"              llama-bench only
#   eval "$(bench/llamacpp-build.sh --server)"     llama-bench and llama-server
#   eval "$(bench/llamacpp-build.sh --isa avx2)"   both, built for AVX2 only
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp"
JOBS="${JOBS:-2}"
server=0 isa=""
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server=1; shift ;;
    --isa) isa="$2"; shift 2 ;;
    *) echo "usage: $0 [--server] [--isa avx2|avxvnni|avx512]" >&2; exit 2 ;;
  esac
done
CMAKE="$(command -v cmake || echo "$CACHE/venv/bin/cmake")"

if [ -n "$isa" ]; then
  flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  case "$isa" in
    avx2) flags+=(-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF) ;;
    avxvnni) flags+=(-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
      -DGGML_AVX_VNNI=ON) ;;
    avx512) flags+=(-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON) ;;
    *) echo "--isa takes avx2, avxvnni or avx512, not '$isa'" >&2; exit 2 ;;
  esac
  eval "$("$root/scripts/llamacpp-reference/build.sh" --source)"
  build="$CACHE/build-$LCP_VERSION-$isa"
  if [ ! -x "$build/bin/llama-bench" ] || [ ! -x "$build/bin/llama-server" ]; then
    [ -x "$CMAKE" ] || "$root/scripts/llamacpp-reference/build.sh" >&2  # installs cmake
    CMAKE="$(command -v cmake || echo "$CACHE/venv/bin/cmake")"
    echo "[llamacpp-build] llama.cpp for $isa in $build (-j$JOBS; slow on 2 cores)" >&2
    "$CMAKE" -S "$LLAMA_SRC" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_BUILD_COMMIT="$LLAMA_CPP_COMMIT" -Wno-dev "${flags[@]}" >&2
    "$CMAKE" --build "$build" -j "$JOBS" --target llama-bench llama-server >&2
  fi
  echo "LLAMA_CPP_COMMIT=$LLAMA_CPP_COMMIT"
  echo "LLAMA_BENCH=$build/bin/llama-bench"
  echo "LLAMA_SERVER=$build/bin/llama-server"
  echo "LLAMA_BUILD_NOTE='CPU, GGML_NATIVE=OFF, $isa: ${flags[*]}'"
  exit 0
fi

"$root/scripts/llamacpp-reference/build.sh" >&2
# shellcheck disable=SC1091
source "$CACHE/env.sh"

LLAMA_SERVER="$LLAMA_BUILD/bin/llama-server"
if [ "$server" = 1 ] && [ ! -x "$LLAMA_SERVER" ]; then
  echo "[llamacpp-build] adding llama-server to $LLAMA_BUILD (-j$JOBS; slow on 2 cores)" >&2
  "$CMAKE" -S "$CACHE/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp" -B "$LLAMA_BUILD" -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -Wno-dev >&2
  "$CMAKE" --build "$LLAMA_BUILD" -j "$JOBS" --target llama-server >&2
fi

echo "LLAMA_CPP_COMMIT=$LLAMA_CPP_COMMIT"
echo "LLAMA_BENCH=$LLAMA_BENCH"
[ -x "$LLAMA_SERVER" ] && echo "LLAMA_SERVER=$LLAMA_SERVER"
echo "LLAMA_BUILD_NOTE='CPU, GGML_NATIVE'"
true
