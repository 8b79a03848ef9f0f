#!/usr/bin/env bash
# Runs every MLXR test: formatting, lints, unit tests, reference-parity tests
# against llama.cpp fixtures on the real models, and end-to-end CLI tests.
# Models come from scripts/fetch-models.sh (run it first; tests that need a
# model fail loudly when MLXR_REQUIRE_MODELS=1 and the file is missing).
# Prints how long each stage took, also when one fails.
set -euo pipefail
cd "$(dirname "$0")/.."

export MLXR_MODELS_DIR="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"

# scripts/test.sh: what CI runs; scripts/test.sh --all: also every fuzz
# target and the aarch64 build under qemu-user.
ALL=0
case "${1:-}" in
    "") ;;
    --all) ALL=1 ;;
    *) echo "usage: $0 [--all]" >&2; exit 2 ;;
esac

STARTED=$SECONDS
TIMES=()
CURRENT=""
CURRENT_T0=0
stage() {
    CURRENT="$1"
    shift
    echo "== $CURRENT"
    CURRENT_T0=$SECONDS
    "$@"
    TIMES+=("$(printf '%6ds  %s' $((SECONDS - CURRENT_T0)) "$CURRENT")")
    CURRENT=""
}
summary() {
    local rc=$?
    echo "== stage times"
    printf '%s\n' "${TIMES[@]}"
    [ -z "$CURRENT" ] || printf '%6ds  %s (FAILED)\n' $((SECONDS - CURRENT_T0)) "$CURRENT"
    printf '%6ds  total (exit %d)\n' $((SECONDS - STARTED)) "$rc"
}
trap summary EXIT

api_tests() {
    local venv="${MLXR_API_VENV:-$HOME/.cache/mlxr/api-venv}"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/api/requirements.txt
    MLXR_BIN="$PWD/target/release/mlxr" "$venv/bin/python" -m pytest -q tests/api
}

fuzz_targets() {
    MLXR_FUZZ_SECONDS="${MLXR_FUZZ_SECONDS:-20}" scripts/fuzz.sh
}

# The x86 kernel paths below the machine's own (MLXR_CPU_ISA caps them):
# the kernel tests, and logits and greedy tokens against llama.cpp's.
# On a CPU without AVX-512 the AVX2 paths are the machine's own (with
# AVX-VNNI where it has it): the test stage above already ran them, and
# `avx2` turns AVX-VNNI off.
isa_paths() {
    under() { # ISA [parity test filter]
        MLXR_CPU_ISA=$1 cargo test --release -p mlxr-models --lib
        MLXR_CPU_ISA=$1 cargo test --release -p mlxr-models --test llamacpp_logits ${2:-}
    }
    if grep -qw avx512f /proc/cpuinfo; then
        if grep -qw avx_vnni /proc/cpuinfo; then
            under avxvnni
        else
            echo "no AVX-VNNI here: the AVX2 paths with it were not run"
        fi
        under avx2
    elif grep -qw avx_vnni /proc/cpuinfo; then
        under avx2
    else
        echo "no AVX-512 here: the AVX2 paths ran in the test stage"
    fi
    under scalar smollm2
}

cuda_clippy() {
    if [ "${MLXR_SKIP_CUDA:-0}" = 1 ]; then
        echo "skipped (MLXR_SKIP_CUDA=1)"
    else
        scripts/build-cuda.sh clippy
    fi
}

stage "cargo fmt --check" cargo fmt --all -- --check
stage "web UI: npm ci, type check, build (embedded into mlxr), Vitest" scripts/build-ui.sh
stage "cargo clippy" cargo clippy --release --workspace --all-targets -- -D warnings
# The CUDA build compiles here without a GPU (its tests run on the GPU
# machine: scripts/gpu-tests.sh).
stage "cargo clippy --features cuda (CUDA 13.0 from PyPI, sm_90)" cuda_clippy
# One x86 build of everything (tests, examples, the mlxr binary the API and
# UI stages run); the test run below compiles nothing more.
stage "cargo build (release, every target)" cargo build --release --workspace --all-targets
stage "cargo test (release: the parity tests run real models)" cargo test --release --workspace --no-fail-fast
stage "x86 kernel paths under MLXR_CPU_ISA=avxvnni, avx2 and scalar: kernel tests, llama.cpp parity" isa_paths
stage "API tests: the official openai and ollama clients and the Python SDK against a real mlxr serve" api_tests
stage "TypeScript SDK: npm ci, tsc, node --test against a real mlxr serve" \
    env MLXR_BIN="$PWD/target/release/mlxr" scripts/sdk-ts-tests.sh
stage "web UI end to end: Playwright (Debian chromium) against a real mlxr serve" \
    env MLXR_BIN="$PWD/target/release/mlxr" scripts/ui-e2e.sh
stage "desktop app: app/desktop's clippy, unit tests and build; the app under Xvfb (UI, socket bridge, tray over D-Bus); the .deb" \
    env MLXR_BIN="$PWD/target/release/mlxr" scripts/desktop-tests.sh
# Not in CI (each is another ~15-25 minutes on 2 slow cores, and CI must stay
# under an hour there): --all adds them.
if [ "$ALL" = 1 ]; then
    stage "fuzzing: every cargo-fuzz target for 20 s from the committed corpora" fuzz_targets
    stage "aarch64 (NEON): kernel tests and greedy replies of the real models under qemu-user" \
        scripts/aarch64-tests.sh
fi
