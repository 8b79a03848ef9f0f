#!/usr/bin/env bash
# Builds and tests the web GUI (app/ui): clean install from the lockfile,
# type check + production build into app/ui/dist, then the Vitest component
# tests. Rebuild mlxr afterwards to embed dist (crates/mlxr-server/build.rs,
# which runs the same npm ci and npm run build itself, into cargo's OUT_DIR,
# when dist is missing or older than the UI's sources).
set -euo pipefail
cd "$(dirname "$0")/../app/ui"

echo "== npm ci"
npm ci --no-audit --no-fund

echo "== npm run build"
npm run build

echo "== npm test"
npm test

echo "app/ui/dist: $(du -sh dist | cut -f1); now rebuild mlxr to embed it (cargo build --release -p mlxr)"
