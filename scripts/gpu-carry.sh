#!/usr/bin/env bash
# Packs what scripts/gpu-tests.sh needs on the GPU machine into dist/ (under
# the device tool's 64 MiB): the CUDA binaries from scripts/build-cuda.sh
# test-bins, xz-compressed; llama.cpp's sources from the pinned
# llama-cpp-python sdist without its docs, tests, models and other backends;
# the vocab-only GGUFs the random models take their tokenizers from.
#
#   scripts/build-cuda.sh test-bins && scripts/gpu-carry.sh
#   then, with the device tool: carry ["dist"], run scripts/gpu-tests.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIST=$ROOT/dist
CACHE=${MLXR_CACHE:-$HOME/.cache/mlxr}
VERSION=0.3.36
SUM=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

xz -T2 -6 -c "$DIST/cuda/mlxr" >"$DIST/cuda/mlxr.xz"
# The GPU test binary (scripts/build-cuda.sh test-bins) is optional: without
# it gpu-tests.sh skips its test stage.
rm -f "$DIST/cuda/gpu.xz"
if [[ -f $DIST/cuda/tests/gpu ]]; then
    xz -T2 -6 -c "$DIST/cuda/tests/gpu" >"$DIST/cuda/gpu.xz"
fi

sdist=$CACHE/llama.cpp/llama_cpp_python-$VERSION.tar.gz
if [[ ! -f $sdist ]]; then
    mkdir -p "$(dirname "$sdist")"
    python3 -m pip download -q --no-deps --no-binary=llama-cpp-python -d "$(dirname "$sdist")" \
        "llama-cpp-python==$VERSION"
fi
echo "$SUM  $sdist" | sha256sum -c --quiet
if [[ ! -f $DIST/llama.cpp.tar.xz ]]; then
    work=$(mktemp -d)
    tar -xzf "$sdist" -C "$work" "llama_cpp_python-$VERSION/vendor/llama.cpp"
    src=$work/llama_cpp_python-$VERSION/vendor
    mkdir -p "$DIST/vocabs"
    cp "$src"/llama.cpp/models/ggml-vocab-{starcoder,qwen2}.gguf "$DIST/vocabs/"
    # tools/ui keeps its top-level files: llama-server's build needs them
    # (with the UI off it embeds no assets), not the UI's sources.
    (cd "$src/llama.cpp" && rm -rf docs media tests .github models conversion \
        ggml/src/ggml-{webgpu,et,metal,hexagon,sycl,vulkan,opencl,cann,musa,zdnn,openvino} &&
        find tools/ui -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +)
    tar -cJf "$DIST/llama.cpp.tar.xz" -C "$src" llama.cpp
    rm -rf "$work"
fi
git -C "$ROOT" rev-parse --short HEAD >"$DIST/COMMIT"
git -C "$ROOT" diff --quiet HEAD || echo "+uncommitted" >>"$DIST/COMMIT"
du -ch "$DIST"/cuda/*.xz "$DIST"/llama.cpp.tar.xz "$DIST"/vocabs/* | tail -1
