#!/usr/bin/env bash
# Runs every MLXR test: formatting, lints, unit tests, reference-parity tests
# against llama.cpp fixtures on the real models, and end-to-end CLI tests.
# Models come from scripts/fetch-models.sh (run it first; tests that need a
# model fail loudly when MLXR_REQUIRE_MODELS=1 and the file is missing).
set -euo pipefail
cd "$(dirname "$0")/.."

export MLXR_MODELS_DIR="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== web UI: npm ci, type check, build (embedded into mlxr by the cargo build below), Vitest"
scripts/build-ui.sh

echo "== cargo clippy"
cargo clippy --release --workspace --all-targets -- -D warnings

echo "== cargo test (release: the parity tests run real models)"
cargo test --release --workspace --no-fail-fast

echo "== API tests: the official openai and ollama clients against a real mlxr serve"
VENV="${MLXR_API_VENV:-$HOME/.cache/mlxr/api-venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/api/requirements.txt
cargo build --release -p mlxr
MLXR_BIN="$PWD/target/release/mlxr" "$VENV/bin/python" -m pytest -q tests/api

echo "== aarch64 (NEON): kernel tests and greedy replies of the real models under qemu-user"
if [ "${MLXR_SKIP_AARCH64:-0}" = 1 ]; then
    echo "skipped (MLXR_SKIP_AARCH64=1)"
else
    scripts/aarch64-tests.sh
fi

echo "== web UI end to end: Playwright (Debian chromium) against a real mlxr serve; screenshots in target/ui-screenshots"
MLXR_BIN="$PWD/target/release/mlxr" scripts/ui-e2e.sh
