#!/usr/bin/env bash
# Real-weight SmolLM2-135M-Instruct folders, offline, from the fetched GGUF:
#   $MLXR_MODELS_DIR/smollm2-135m-hf-bf16   HF safetensors (bf16) + tokenizer
#   $MLXR_MODELS_DIR/smollm2-135m-mlx-q4    mlx_lm.convert -q --q-bits 4 --q-group-size 64
#   $MLXR_MODELS_DIR/smollm2-135m-mlx-q8    mlx_lm.convert -q --q-bits 8 --q-group-size 64
# and the reference fixture tests/fixtures/real-folders/smollm2.json.
# See scripts/tiny-models/real/README.md. Needs the venvs of scripts/tiny-models/make.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cache="${MLXR_CACHE:-$HOME/.cache/mlxr}"
models="${MLXR_MODELS_DIR:-$cache/models}"
out="${REAL_FOLDERS_OUT:-$root/tests/fixtures/real-folders/smollm2.json}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0 TQDM_DISABLE=1

hf_py="$cache/hf-reference/venv/bin/python"
mlx_py="$cache/tiny-models/venv-mlx/bin/python"
for p in "$hf_py" "$mlx_py"; do
  [ -x "$p" ] || { echo "missing $p: run scripts/hf-reference/make.sh and scripts/tiny-models/make.sh once" >&2; exit 1; }
done
[ -s "$models/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { echo "missing GGUF: run scripts/fetch-models.sh" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py="$here/make-smollm2-folders.py"

echo "== GGUF -> $models/smollm2-135m-hf-bf16"
"$hf_py" "$py" hf --models-dir "$models" --work "$work"
for spec in "q4 4" "q8 8"; do
  set -- $spec
  dst="$models/smollm2-135m-mlx-$1"
  echo "== mlx_lm.convert -> $dst"
  rm -rf "$dst"
  "$mlx_py" -m mlx_lm convert --hf-path "$models/smollm2-135m-hf-bf16" --mlx-path "$dst" \
    -q --q-bits "$2" --q-group-size 64 2>&1 | grep -v '^\[INFO\] Loading' || true
  test -s "$dst/config.json"
done
echo "== transformers f32 reference"
"$hf_py" "$py" ref-hf --models-dir "$models" --work "$work"
echo "== mlx-lm references"
"$mlx_py" "$py" ref-mlx --models-dir "$models" --work "$work"
"$hf_py" "$py" merge --models-dir "$models" --work "$work" --out "$out"
echo "== sizes"
du -sh "$models/smollm2-135m-hf-bf16" "$models/smollm2-135m-mlx-q4" "$models/smollm2-135m-mlx-q8" \
  "$models/SmolLM2-135M-Instruct.Q4_1.gguf"
