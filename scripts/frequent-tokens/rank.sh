#!/usr/bin/env bash
# Regenerates crates/mlxr-engine/src/spec/frequent_tokens/qwen2.txt: the
# Qwen2 vocabulary's tokens ranked by how often they occur in a mixed code
# and English corpus, for the draft model's partial LM head (FR-Spec).
#
#   scripts/frequent-tokens/rank.sh [MODEL.gguf]
#
# The corpus (about 3 MB of each of Python, Rust, C, JavaScript,
# TypeScript, Go, Java and English prose, plus the SQL and shell there are)
# comes from files this machine has (the cargo registry of Cargo.lock's
# crates, Python's standard library, /usr/share and /usr/include) and from
# pinned packages: TypeScript declarations from npm, the Go standard
# library and the JDK's sources from Debian. Nothing is taken from
# bench/prompts. Needs mlxr (MLXR_BIN, default target/release/mlxr) and
# pip's `gguf` (for the token strings).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=${1:-$HOME/.cache/mlxr/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
MLXR_BIN=${MLXR_BIN:-$ROOT/target/release/mlxr}
WORK=${WORK:-$(mktemp -d /tmp/frequent-tokens.XXXX)}
OUT=$ROOT/crates/mlxr-engine/src/spec/frequent_tokens/qwen2.txt

mkdir -p "$WORK/extra" && cd "$WORK/extra"
(cd "$ROOT" && cargo fetch -q)
npm pack -q typescript@7.0.2 @types/node@26.6.11 @types/react@19.3.3 >/dev/null
for f in *.tgz; do mkdir -p "npm/${f%.tgz}" && tar xzf "$f" -C "npm/${f%.tgz}"; done
apt-get download -q golang-1.19-src=1.19.8-2 openjdk-17-source=17.0.21.1+2-1~deb12u1 2>/dev/null
for d in *.deb; do dpkg-deb -x "$d" deb; done
mkdir -p java && (cd java && unzip -qo ../deb/usr/lib/jvm/openjdk-17/lib/src.zip \
    'java.base/java/util/*' 'java.base/java/lang/*' 'java.base/java/io/*' 'java.net.http/*' 'java.sql/*')
rm -rf deb/usr/lib/jvm

python3 -m pip install -q gguf==0.19.0
python3 "$ROOT/scripts/frequent-tokens/rank.py" --mlxr "$MLXR_BIN" --model "$MODEL" \
    --roots "$WORK/extra" "${CARGO_HOME:-$HOME/.cargo}/registry/src" /usr/lib/python3.11 /usr/share /usr/include \
    --out "$OUT"
