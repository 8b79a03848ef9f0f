#!/usr/bin/env bash
# Builds the CPU kernel tests and `mlxr` for aarch64 and runs them under
# qemu-user: the kernel tests on a CPU with the dot-product extension (every
# kernel test) and on one without it (the tests that run only our kernels:
# candle's own NEON code needs SDOT); then `mlxr run` greedy on each real
# model, whose reply must equal the x86 build's (target/release/mlxr) word
# for word. No ARM machine is needed, and none was used: this checks
# results, not speed.
#
# The cross toolchain (Debian trixie's rustc with its aarch64 std, the
# aarch64 gcc as linker, qemu-user) lives in a debootstrapped folder,
# MLXR_CROSS_ROOT (default ~/.cache/mlxr/cross-trixie), made on first use
# from Debian's packages. Needs root (debootstrap, chroot, bind mounts).
#
#   scripts/aarch64-tests.sh                 # everything
#   scripts/aarch64-tests.sh --kernels-only  # only the kernel tests
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT="${MLXR_CROSS_ROOT:-$HOME/.cache/mlxr/cross-trixie}"
MIRROR="${MLXR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="rustc-web cargo-web rust-web-clippy libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user ca-certificates"

if [ ! -x "$ROOT/usr/bin/qemu-aarch64" ] || [ ! -d "$ROOT/usr/lib/rustlib/aarch64-unknown-linux-gnu" ] \
    || [ ! -x "$ROOT/usr/bin/cargo-clippy" ]; then
    echo "== making the aarch64 cross toolchain in $ROOT (debootstrap trixie + $PACKAGES)"
    command -v debootstrap >/dev/null \
        || apt-get install -y -qq debootstrap >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
    rm -rf "$ROOT"
    mkdir -p "$(dirname "$ROOT")"
    debootstrap --variant=minbase trixie "$ROOT" "$MIRROR" >/dev/null
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
    chroot "$ROOT" sh -c "dpkg --add-architecture arm64 && apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null"
fi

MODELS="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"

# The project at /src, the models at /models, /proc for cargo, this machine's CA bundle (crates.io
# may sit behind a proxy that signs its own certificates).
mkdir -p "$ROOT/src"
mountpoint -q "$ROOT/src" || mount --bind "$PWD" "$ROOT/src"
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mkdir -p "$ROOT/models" "$MODELS"
mountpoint -q "$ROOT/models" || mount --bind "$MODELS" "$ROOT/models"
trap 'umount "$ROOT/src" "$ROOT/proc" "$ROOT/models" 2>/dev/null || true' EXIT
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" "$ROOT/tmp/ca.crt"

cross() {
    local cpu="$1"
    shift
    chroot "$ROOT" env -C /src \
        HOME=/root PATH=/usr/bin:/bin \
        SSL_CERT_FILE=/tmp/ca.crt CARGO_HTTP_CAINFO=/tmp/ca.crt \
        CARGO_TARGET_DIR=/src/target/aarch64-cross \
        RUSTFLAGS="-D warnings" \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu $cpu" \
        "$@"
}

echo "== aarch64: $(chroot "$ROOT" rustc --version)"
echo "== aarch64 clippy (the NEON code and every cfg(not x86) path of the kernels)"
cross max cargo clippy --release --target aarch64-unknown-linux-gnu -p mlxr-models --all-targets -- -D warnings
echo "== aarch64 kernel tests under qemu, CPU with SDOT (NEON + dot product)"
cross max cargo test --release --target aarch64-unknown-linux-gnu -p mlxr-models --lib -- kernels
echo "== aarch64 kernel tests under qemu, CPU without SDOT (Cortex-A72)"
cross cortex-a72 cargo test --release --target aarch64-unknown-linux-gnu -p mlxr-models --lib \
    -- kernels::tests::bit_identical_to_ggml_dumps kernels::tests::independent_rows
[ "${1:-}" = "--kernels-only" ] && exit 0

echo "== aarch64 mlxr: the same greedy replies as the x86 build, under qemu"
cross max cargo build --release --target aarch64-unknown-linux-gnu -p mlxr
[ -x target/release/mlxr ] || cargo build --release -p mlxr
PROMPT="Name three colors of the rainbow."
for model in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    if [ ! -f "$MODELS/$model" ]; then
        if [ "${MLXR_REQUIRE_MODELS:-0}" = 1 ]; then
            echo "missing $MODELS/$model (scripts/fetch-models.sh)" >&2
            exit 1
        fi
        echo "skipping $model: not in $MODELS"
        continue
    fi
    args=(run --temperature 0 -n 24 -c 256 -t 2)
    x86=$(target/release/mlxr "${args[@]}" -m "$MODELS/$model" "$PROMPT")
    arm=$(cross max qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max \
        target/aarch64-cross/aarch64-unknown-linux-gnu/release/mlxr "${args[@]}" -m "/models/$model" "$PROMPT")
    if [ "$x86" != "$arm" ] || [ -z "$x86" ]; then
        printf 'aarch64 reply differs on %s\nx86:     %s\naarch64: %s\n' "$model" "$x86" "$arm" >&2
        exit 1
    fi
    echo "$model: same reply on aarch64 (NEON) and x86: ${x86:0:60}..."
done
