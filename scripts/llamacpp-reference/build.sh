#!/usr/bin/env bash
# Build llama.cpp (CPU only) from the vendored copy inside the pinned
# llama-cpp-python sdist on PyPI, then compile our reference program
# (reference.cpp, our own code against llama.h) against it.
#
#   scripts/llamacpp-reference/build.sh
#
# Everything lands in ${MLXR_CACHE:-~/.cache/mlxr}/llama.cpp/; nothing in the
# repo is touched. Idempotent: each step is skipped when its output exists.
#   scripts/llamacpp-reference/build.sh --source   only fetch and extract the sdist
#
# Env: JOBS (default 2) parallel compile jobs, PYTHON (default python3).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
JOBS="${JOBS:-2}"

# Pinned source: llama-cpp-python sdist and the llama.cpp commit it vendors
# (from its CHANGELOG).
LCP_VERSION=0.3.36
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_COMMIT=0c1e57098

CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp"
SRC="$CACHE/llama_cpp_python-$LCP_VERSION"
LLAMA="$SRC/vendor/llama.cpp"
BUILD="$CACHE/build-$LCP_VERSION"
BIN="$CACHE/bin-$LCP_VERSION"
mkdir -p "$CACHE" "$BIN"

log() { echo "[build.sh] $*" >&2; }
# sha256sum, or macOS's shasum.
sha256() { { sha256sum "$1" 2>/dev/null || shasum -a 256 "$1"; } | cut -d' ' -f1; }

# 1. sdist -------------------------------------------------------------------
if [ ! -f "$LLAMA/include/llama.h" ]; then
  tarball="$CACHE/dl/llama_cpp_python-$LCP_VERSION.tar.gz"
  if [ ! -f "$tarball" ] || [ "$(sha256 "$tarball")" != "$LCP_SHA256" ]; then
    log "downloading llama-cpp-python==$LCP_VERSION sdist"
    rm -rf "$CACHE/dl"; mkdir -p "$CACHE/dl"
    # --no-binary only for this package: its build deps (scikit-build-core)
    # come as wheels and pip only prepares metadata, it compiles nothing.
    "$PY" -m pip download --quiet --no-deps --no-binary=llama-cpp-python \
      -d "$CACHE/dl" "llama-cpp-python==$LCP_VERSION" >&2
  fi
  got="$(sha256 "$tarball")"
  [ "$got" = "$LCP_SHA256" ] || { log "checksum mismatch for $tarball: $got"; exit 1; }
  log "extracting $tarball"
  rm -rf "$SRC"
  tar -xzf "$tarball" -C "$CACHE"
fi

if [ "${1:-}" = "--source" ]; then
  echo "LCP_VERSION=$LCP_VERSION"
  echo "LLAMA_CPP_COMMIT=$LLAMA_CPP_COMMIT"
  echo "LLAMA_SRC=$LLAMA"
  exit 0
fi

# 2. cmake -------------------------------------------------------------------
CMAKE="$(command -v cmake || true)"
if [ -z "$CMAKE" ]; then
  CMAKE="$CACHE/venv/bin/cmake"
  if [ ! -x "$CMAKE" ]; then
    log "installing cmake into $CACHE/venv (pip)"
    "$PY" -m venv "$CACHE/venv"
    "$CACHE/venv/bin/python" -m pip install --quiet "cmake>=3.21,<4" >&2
  fi
fi
command -v make >/dev/null || { log "make is required (apt-get install make)"; exit 1; }

# 3. llama.cpp ---------------------------------------------------------------
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  log "configuring llama.cpp in $BUILD"
  "$CMAKE" -S "$LLAMA" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=ON \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_COMMIT="$LLAMA_CPP_COMMIT" \
    -Wno-dev >&2
fi
if [ ! -x "$BUILD/bin/llama-bench" ] || [ ! -x "$BUILD/bin/llama-tokenize" ]; then
  log "building llama, llama-bench, llama-tokenize with -j$JOBS (slow on 2 cores)"
  start=$(date +%s)
  "$CMAKE" --build "$BUILD" -j "$JOBS" --target llama llama-bench llama-tokenize >&2
  log "llama.cpp build took $(( $(date +%s) - start ))s"
fi

# 4. our reference program ---------------------------------------------------
REF="$BIN/reference"
if [ ! -x "$REF" ] || [ "$HERE/reference.cpp" -nt "$REF" ] || [ "$BUILD/bin/libllama.so" -nt "$REF" ]; then
  log "compiling reference.cpp"
  g++ -std=c++17 -O2 -Wall -Wextra \
    -I "$LLAMA/include" -I "$LLAMA/ggml/include" \
    "$HERE/reference.cpp" -o "$REF.tmp" \
    -L "$BUILD/bin" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$BUILD/bin" -pthread
  mv "$REF.tmp" "$REF"
fi

# Machine-readable summary for make-fixtures.sh.
cat > "$BIN/env.sh" <<ENV
LCP_VERSION=$LCP_VERSION
LLAMA_CPP_COMMIT=$LLAMA_CPP_COMMIT
LLAMA_BUILD=$BUILD
REFERENCE=$REF
LLAMA_BENCH=$BUILD/bin/llama-bench
LLAMA_TOKENIZE=$BUILD/bin/llama-tokenize
ENV
cp "$BIN/env.sh" "$CACHE/env.sh"  # the pin built last
log "ok: $REF"
