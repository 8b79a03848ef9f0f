#!/usr/bin/env bash
# Regenerate tests/fixtures/tiny-models (random-weight HF / MLX / GGUF models + references).
# See scripts/tiny-models/README.md. ~4 min on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${MLXR_CACHE:-$HOME/.cache/mlxr}"
out="${TINY_OUT:-$root/tests/fixtures/tiny-models}"
export TINY_OUT="$out" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0
llama_cpp="${LLAMA_CPP_DIR:-$cache/llama.cpp/llama_cpp_python-0.3.36/vendor/llama.cpp}"

hf_py="$cache/hf-reference/venv/bin/python"
if [ ! -x "$hf_py" ]; then
  echo "no $hf_py: run scripts/hf-reference/make.sh once (it creates the torch venv)" >&2
  exit 1
fi
mlx_venv="$cache/tiny-models/venv-mlx"
if [ ! -x "$mlx_venv/bin/python" ]; then
  python3 -m venv "$mlx_venv"
  "$mlx_venv/bin/pip" install -q -r "$here/requirements.txt"
fi
extra="$cache/tiny-models/gguf-extra"
if [ ! -d "$extra/sentencepiece" ]; then
  "$mlx_venv/bin/pip" install -q --target "$extra" sentencepiece==0.2.1
fi
"$mlx_venv/bin/pip" freeze > "$cache/tiny-models/pip-freeze-mlx.txt"

rm -rf "$out"
mkdir -p "$out/gguf"
"$hf_py" "$here/make-tiny-models.py" hf
for m in llama mistral qwen2 qwen3 phi3 gemma2-gguf; do
  PYTHONPATH="$extra" "$hf_py" "$here/convert-gguf.py" "$llama_cpp" qwen2 -- \
    "$out/$m" --outtype f32 --outfile "$out/gguf/$m.f32.gguf" 2>&1 | grep -v '^INFO' || true
  test -s "$out/gguf/$m.f32.gguf"
done
PYTHONPATH="$llama_cpp/gguf-py" "$hf_py" "$here/make-tiny-models.py" gguf-ref
"$mlx_venv/bin/python" "$here/make-tiny-models.py" mlx
"$mlx_venv/bin/python" "$here/make-tiny-models.py" index
chmod -R u+rw,go+r "$out"
du -sh "$out"
