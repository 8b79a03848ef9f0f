#!/usr/bin/env bash
# Regenerate the independent float32 reference logits MLXR's tests compare
# against:
#   tests/fixtures/hf-f32/smollm2.json, tests/fixtures/hf-f32/gemma3.json
#
#   scripts/hf-reference/make.sh                  # both models
#   scripts/hf-reference/make.sh --only gemma3    # extra args go to the script
#
# Creates a venv under ${MLXR_CACHE:-~/.cache/mlxr}/hf-reference/venv with the
# pinned packages of requirements.txt (PyPI only; ~5.5 GB, torch is the CUDA
# build but runs on CPU), fetches the models (scripts/fetch-models.sh,
# SHA-verified) and runs make-f32-logits.py offline. CI never runs this: tests
# read only the committed JSON.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/hf-reference"
VENV="$CACHE/venv"
REQ="$HERE/requirements.txt"

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

bash "$ROOT/scripts/fetch-models.sh" smollm2 >&2
bash "$ROOT/scripts/fetch-models.sh" gemma3 >&2

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
exec "$VENV/bin/python" "$HERE/make-f32-logits.py" "$@"
