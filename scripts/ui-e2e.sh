#!/usr/bin/env bash
# End-to-end tests of the web UI in a real browser: Debian's current chromium
# (installed or upgraded with apt-get on every run, so the tests meet the
# browser users have, not whatever old one the machine kept) driven headless
# by playwright-core (no browser download) against a real `mlxr serve` on
# SmolLM2, all-MiniLM-L6-v2 for the embeddings and Qwen2.5-Coder-0.5B for
# tool calling (each required under MLXR_REQUIRE_MODELS=1, else its check is
# skipped with a message).
# Screenshots of every page, light and dark, go to target/ui-screenshots/
# (or $MLXR_SCREENSHOTS). CHROMIUM=/path/to/chromium uses that browser as it
# is instead (no apt-get).
#
# Needs target/release/mlxr built with the UI embedded (scripts/build-ui.sh,
# then cargo build --release -p mlxr) and the models of scripts/fetch-models.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

MODELS_DIR="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
MODEL_FILE="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
EMBED_DIR="$MODELS_DIR/all-MiniLM-L6-v2"
TOOL_FILE="$MODELS_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
BIN="${MLXR_BIN:-$ROOT/target/release/mlxr}"
SHOTS="${MLXR_SCREENSHOTS:-$ROOT/target/ui-screenshots}"

[ -x "$BIN" ] || { echo "ui-e2e: $BIN missing: cargo build --release -p mlxr" >&2; exit 1; }
[ -f "$MODEL_FILE" ] || { echo "ui-e2e: $MODEL_FILE missing: run scripts/fetch-models.sh" >&2; exit 1; }
if [ ! -d "$EMBED_DIR" ] && [ "${MLXR_REQUIRE_MODELS:-0}" = 1 ]; then
    echo "ui-e2e: $EMBED_DIR missing and MLXR_REQUIRE_MODELS=1: run scripts/fetch-models.sh minilm" >&2
    exit 1
fi
if [ ! -f "$TOOL_FILE" ] && [ "${MLXR_REQUIRE_MODELS:-0}" = 1 ]; then
    echo "ui-e2e: $TOOL_FILE missing and MLXR_REQUIRE_MODELS=1: run scripts/fetch-models.sh qwen-coder-0.5b" >&2
    exit 1
fi

if [ -n "${CHROMIUM:-}" ]; then
    [ -x "$CHROMIUM" ] || { echo "ui-e2e: CHROMIUM=$CHROMIUM is not an executable" >&2; exit 1; }
else
    CHROMIUM=/usr/bin/chromium
    APT=(env DEBIAN_FRONTEND=noninteractive apt-get)
    [ "$(id -u)" = 0 ] || APT=(sudo "${APT[@]}")
    echo "== installing or upgrading Debian's chromium (apt-get)"
    "${APT[@]}" update -qq \
        && "${APT[@]}" install -y -qq chromium >/dev/null \
        || { echo "ui-e2e: apt-get could not install chromium (or set CHROMIUM=/path/to/chromium)" >&2; exit 1; }
fi
echo "== browser: $("$CHROMIUM" --version)"
if [ ! -d app/ui/node_modules/playwright-core ]; then
    (cd app/ui && npm ci --no-audit --no-fund)
fi

TMP="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
ARGS=(serve --home "$TMP/home" --host "127.0.0.1:$PORT" --kv-cache-mem 256MiB --allow-local-pulls
      -m "$MODEL_FILE" --name smollm2)
EMBED_MODEL=""
if [ -d "$EMBED_DIR" ]; then
    ARGS+=(-m "$EMBED_DIR" --name all-minilm)
    EMBED_MODEL=all-minilm
fi
TOOL_MODEL=""
if [ -f "$TOOL_FILE" ]; then
    ARGS+=(-m "$TOOL_FILE" --name qwen-coder)
    TOOL_MODEL=qwen-coder
fi
# The pull test registers this copy from a local path.
cp "$MODEL_FILE" "$TMP/e2e-pull.gguf"
# The quantize test starts from SmolLM2's weights as F16 (float, and big
# enough for its progress to show).
"$BIN" quantize "$MODEL_FILE" "$TMP/e2e-f16.gguf" --type F16 --allow-requantize >/dev/null
# The import test uploads a GGUF the daemon has no blob of from the browser;
# the convert test starts from SmolLM2 as a Hugging Face folder.
"$BIN" quantize "$MODEL_FILE" "$TMP/e2e-import.gguf" --type Q8_0 --allow-requantize >/dev/null
"$BIN" convert "$MODEL_FILE" "$TMP/e2e-hf" --outtype f16 >/dev/null 2>&1

echo "== mlxr serve on $URL"
"$BIN" "${ARGS[@]}" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 300); do
    if curl -sf "$URL/health" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "ui-e2e: mlxr serve exited:" >&2; cat "$TMP/server.log" >&2; exit 1
    fi
    sleep 0.1
done
curl -sf "$URL/health" >/dev/null || { echo "ui-e2e: mlxr serve did not start" >&2; cat "$TMP/server.log" >&2; exit 1; }

rm -rf "$SHOTS"
echo "== Playwright (playwright-core + $CHROMIUM)"
status=0
(cd app/ui && MLXR_URL="$URL" MLXR_E2E_MODEL=smollm2 MLXR_E2E_EMBED_MODEL="$EMBED_MODEL" \
    MLXR_E2E_TOOL_MODEL="$TOOL_MODEL" \
    MLXR_E2E_PULL_SOURCE="$TMP/e2e-pull.gguf" MLXR_E2E_FLOAT_SOURCE="$TMP/e2e-f16.gguf" \
    MLXR_E2E_IMPORT_SOURCE="$TMP/e2e-import.gguf" MLXR_E2E_FOLDER_SOURCE="$TMP/e2e-hf" MLXR_SCREENSHOTS="$SHOTS" CHROMIUM="$CHROMIUM" \
    npx vitest run --config e2e/vitest.config.ts) || status=$?
if [ "$status" -ne 0 ]; then
    echo "ui-e2e: failed; the server log:" >&2
    tail -n 50 "$TMP/server.log" >&2
fi
echo "ui-e2e: screenshots in $SHOTS"
exit "$status"
