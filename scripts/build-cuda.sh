#!/usr/bin/env bash
# Builds `mlxr` with `--features cuda` for Hopper (sm_90) on a machine with no GPU
# and no system CUDA: the CUDA 13.0 toolchain comes from PyPI wheels, libcuda from
# a generated stub (only the linker sees it; the GPU machine's driver provides the
# real libcuda.so.1 at run time).
#
#   scripts/build-cuda.sh            # -> dist/cuda/mlxr (stripped)
#   scripts/build-cuda.sh clippy     # cargo clippy --features cuda (what CI runs;
#                                    # candle's own kernels are not compiled: lint-nvcc.sh)
#   scripts/build-cuda.sh test-bins  # also the GPU test binaries -> dist/cuda/tests/
#
# Why 13.0 exactly: candle loads its kernels as PTX through the driver's JIT, and
# the H200 machines' driver (580, CUDA 13.0) accepts PTX only up to ISA 9.0, which
# newer nvcc releases exceed.
#
# Running the binary there: LD_LIBRARY_PATH must hold libcublas.so.13,
# libcublasLt.so.13, libcurand.so.10 and libcudart.so.13 (PyTorch's nvidia wheels on
# the device machine have them; scripts/gpu-tests.sh finds them).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-build}
PREFIX=${MLXR_CUDA_PREFIX:-$HOME/.cache/mlxr/cuda13}
TARGET_DIR=${MLXR_CUDA_TARGET_DIR:-$ROOT/target/cuda}
DIST=$ROOT/dist/cuda

WHEELS=(
    nvidia-cuda-nvcc==13.0.88     # nvcc, ptxas, fatbinary
    nvidia-nvvm==13.0.88          # cicc, libdevice
    nvidia-cuda-runtime==13.0.96  # cuda_runtime.h, cuda_fp16.h, libcudart
    nvidia-cuda-crt==13.0.88      # crt/ headers
    nvidia-cuda-cccl==13.0.85     # cub, thrust, cuda/std
    nvidia-cublas==13.0.2.14      # libcublas, libcublasLt (link time)
    nvidia-curand==10.4.0.35      # libcurand (link time)
    nvidia-cuda-nvrtc==13.0.88    # libnvrtc (link time)
)

stage() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

install_toolchain() {
    local cu="$PREFIX/root/nvidia/cu13"
    if [[ -x $cu/bin/nvcc && -x $cu/nvvm/bin/cicc && -e $cu/lib/stubs/libcuda.so ]]; then
        return
    fi
    stage "CUDA 13.0 toolchain from PyPI into $PREFIX"
    mkdir -p "$PREFIX/wheels" "$PREFIX/root"
    python3 -m pip download -q --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
        --python-version 3.11 -d "$PREFIX/wheels" "${WHEELS[@]%%#*}"
    for wheel in "$PREFIX"/wheels/*.whl; do
        python3 -m zipfile -e "$wheel" "$PREFIX/root"
    done
    # zipfile drops the exec bits.
    chmod +x "$cu"/bin/* "$cu"/nvvm/bin/*
    # The linker looks for unversioned names.
    (cd "$cu/lib" && for lib in cudart cublas cublasLt curand nvrtc; do
        ln -sf "$(ls lib$lib.so.* | head -1)" "lib$lib.so"
    done)
    make_libcuda_stub "$cu"
}

# No wheel ships libcuda (it belongs to the driver). Generate a stub with every
# driver entry point cudarc binds, each returning CUDA_ERROR_STUB_LIBRARY (34).
make_libcuda_stub() {
    local cu=$1 cudarc
    cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* | head -1)
    [[ -f $cudarc/src/driver/sys/mod.rs ]] || { echo "cudarc sources not found: run cargo fetch" >&2; exit 1; }
    mkdir -p "$cu/lib/stubs"
    grep -o 'fn cu[A-Za-z0-9_]*' "$cudarc/src/driver/sys/mod.rs" | sed 's/^fn //' | sort -u |
        sed 's/.*/int &(void) { return 34; }/' >"$cu/lib/stubs/libcuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$cu/lib/stubs/libcuda.so" "$cu/lib/stubs/libcuda_stub.c"
}

cd "$ROOT"
cargo fetch -q
install_toolchain

export CUDA_HOME="$PREFIX/root/nvidia/cu13"
export CUDA_PATH="$CUDA_HOME"
export PATH="$CUDA_HOME/bin:$PATH"
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
export CUDARC_CUDA_VERSION=13000
export CARGO_TARGET_DIR="$TARGET_DIR"
nvcc --version | tail -2

case $MODE in
clippy)
    stage "cargo clippy --features cuda (candle's kernels stubbed: scripts/lint-nvcc.sh)"
    NVCC="$ROOT/scripts/lint-nvcc.sh" CARGO_TARGET_DIR="$ROOT/target/cuda-lint" cargo clippy --release --locked -p mlxr -p mlxr-models -p mlxr-engine --features cuda --all-targets -- -D warnings
    ;;
build | test-bins)
    stage "cargo build --release -p mlxr --features cuda (sm_$CUDA_COMPUTE_CAP)"
    cargo build --release --locked -p mlxr --features cuda
    mkdir -p "$DIST"
    strip -o "$DIST/mlxr" "$TARGET_DIR/release/mlxr"
    if [[ $MODE == test-bins ]]; then
        stage "GPU test binaries"
        mkdir -p "$DIST/tests"
        cargo test --release --locked -p mlxr-models --features cuda --test gpu --no-run --message-format=json |
            python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])' | while read -r exe; do
            strip -o "$DIST/tests/$(basename "${exe%-*}")" "$exe"
        done
    fi
    ls -la "$DIST" "$DIST"/tests 2>/dev/null || true
    ;;
*)
    echo "usage: $0 [build|clippy|test-bins]" >&2
    exit 2
    ;;
esac
