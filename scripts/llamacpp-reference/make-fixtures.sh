#!/usr/bin/env bash
# Regenerate the llama.cpp reference fixtures MLXR's tests compare against:
#   tests/fixtures/llamacpp/smollm2.json, tests/fixtures/llamacpp/gemma3.json
# and scripts/llamacpp-reference/llama-bench-latest.md.
#
#   scripts/llamacpp-reference/make-fixtures.sh            # everything
#   SKIP_BENCH=1 scripts/llamacpp-reference/make-fixtures.sh
#   SKIP_GENERATE=1 ...   # tokenize + chat templates only (keeps the existing
#                         # generate entries when model, llama.cpp and prompts match)
#
# Builds llama.cpp first (build.sh; cached, slow only the first time) and
# fetches the models (scripts/fetch-models.sh, SHA-verified). CI never runs
# this: it only reads the committed JSON.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
MODELS_DIR="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
CACHE="${MLXR_CACHE:-$HOME/.cache/mlxr}/llama.cpp"
OUT="$ROOT/tests/fixtures/llamacpp"
THREADS=2
NCTX=4096

bash "$HERE/build.sh"
# shellcheck disable=SC1090
. "$CACHE/env.sh"

bash "$ROOT/scripts/fetch-models.sh" smollm2 >&2
bash "$ROOT/scripts/fetch-models.sh" gemma3 >&2

# jinja2 (optional) lets fixtures.py also record a Jinja rendering of each
# model's chat template; it lives in the build's venv when cmake was pip-installed.
if [ -x "$CACHE/venv/bin/python" ]; then
  PY="$CACHE/venv/bin/python"
  "$PY" -c 'import jinja2' 2>/dev/null || "$PY" -m pip install --quiet "jinja2==3.1.6" >&2 || true
fi

args=(--reference "$REFERENCE" --models-dir "$MODELS_DIR" --out-dir "$OUT"
      --lcp-version "$LCP_VERSION" --llama-commit "$LLAMA_CPP_COMMIT"
      --threads "$THREADS" --ctx "$NCTX")
[ -n "${SKIP_GENERATE:-}" ] && args+=(--skip-generate)
"$PY" "$HERE/fixtures.py" "${args[@]}"

[ -n "${SKIP_BENCH:-}" ] && exit 0

# llama-bench: -t 2 -p 128 -n 32, both models, into a small markdown file.
md="$HERE/llama-bench-latest.md"
{
  echo "# llama-bench (latest run)"
  echo
  echo "- date: $(date -u +%Y-%m-%d)"
  echo "- llama-cpp-python $LCP_VERSION (vendored llama.cpp $LLAMA_CPP_COMMIT), CPU build, GGML_NATIVE=ON"
  echo "- host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "- command: \`llama-bench -m MODEL -t 2 -p 128 -n 32\`"
  echo "- machine load at start: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs may share the 2 cores)"
  for m in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    echo
    echo "## $m"
    echo
    "$LLAMA_BENCH" -m "$MODELS_DIR/$m" -t "$THREADS" -p 128 -n 32 2>/dev/null
  done
} > "$md.tmp"
mv "$md.tmp" "$md"
echo "wrote $md" >&2
