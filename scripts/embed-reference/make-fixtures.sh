#!/usr/bin/env bash
# Regenerate tests/fixtures/embeddings/all-minilm.json, the reference
# embeddings crates/mlxr-embed/tests/reference.rs compares against.
#
#   scripts/embed-reference/make-fixtures.sh
#
# Uses the transformers + torch venv of scripts/hf-reference/ (created there,
# the same way, if missing: PyPI pins of scripts/hf-reference/requirements.txt),
# fetches all-MiniLM-L6-v2 with scripts/fetch-models.sh (SHA-verified) and runs
# make-fixtures.py offline. CI never runs this: the test reads the committed JSON.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/hf-reference"
VENV="$CACHE/venv"
REQ="$ROOT/scripts/hf-reference/requirements.txt"

if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$CACHE"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "pip==25.3" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ" >&2
  "$VENV/bin/python" -m pip freeze > "$CACHE/pip-freeze.txt"
  echo "$want" > "$stamp"
fi

bash "$ROOT/scripts/fetch-models.sh" minilm >&2

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
exec "$VENV/bin/python" "$HERE/make-fixtures.py" "$@"
