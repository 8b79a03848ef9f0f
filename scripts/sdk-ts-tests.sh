#!/usr/bin/env bash
# The TypeScript SDK (sdks/typescript): clean install from the lockfile, tsc
# build (ESM + .d.ts into dist/), then node's test runner against a real
# `mlxr serve` that the tests start on SmolLM2 and all-MiniLM-L6-v2
# (test/daemon.mjs; a missing model fails the run).
# MLXR_BIN (default target/release/mlxr) and MLXR_MODELS_DIR as for tests/api.
set -euo pipefail
cd "$(dirname "$0")/.."
export MLXR_BIN="${MLXR_BIN:-$PWD/target/release/mlxr}"
[ -x "$MLXR_BIN" ] || { echo "sdk-ts-tests: $MLXR_BIN missing: cargo build --release -p mlxr" >&2; exit 1; }
cd sdks/typescript
npm ci --no-audit --no-fund
npm run build
npm test
