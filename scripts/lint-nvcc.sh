#!/usr/bin/env bash
# A stand-in for nvcc that `scripts/build-cuda.sh clippy` hands to candle-kernels'
# build script (through $NVCC), so that linting the `cuda` feature does not spend
# ~20 minutes of CI compiling candle's own kernels (its MMQ templates above all).
# Lints need those kernels to exist, not to work: PTX files come out empty,
# objects are empty ELF objects. Everything else (--version, --list-gpu-code) is
# the real nvcc. Our own kernels (crates/mlxr-models/build.rs) always use the
# real nvcc from $CUDA_HOME, and the lint build has its own target directory, so
# these outputs never reach a binary.
set -euo pipefail
real="$CUDA_HOME/bin/nvcc"
mode="" out="" outdir="" input=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
    --ptx) mode=ptx ;;
    -c) mode=obj ;;
    --lib) mode=lib ;;
    -o) out=${args[i + 1]} ;;
    --output-directory) outdir=${args[i + 1]} ;;
    *.cu) input=${args[i]} ;;
    esac
done
case $mode in
ptx)
    name=$(basename "$input" .cu)
    : >"${outdir:-.}/$name.ptx"
    ;;
obj)
    cc -c -x c /dev/null -o "$out"
    ;;
lib)
    objs=()
    for ((i = 0; i < ${#args[@]}; i++)); do
        [[ ${args[i]} == *.o ]] && objs+=("${args[i]}")
    done
    rm -f "$out"
    ar rcs "$out" "${objs[@]}"
    ;;
*)
    exec "$real" "$@"
    ;;
esac
