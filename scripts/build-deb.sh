#!/usr/bin/env bash
# Builds dist/mlxr_VERSION_ARCH.deb with dpkg-deb: the mlxr daemon/CLI and
# the mlxr-desktop app in /usr/bin, a desktop entry and the app's icon.
#   scripts/build-deb.sh [MLXR_BIN [MLXR_DESKTOP_BIN [OUT_DIR]]]
# (defaults: target/release/mlxr, app/desktop/target/release/mlxr-desktop,
# dist). Build them first: cargo build --release -p mlxr, and
# cargo build --release in app/desktop. Prints the .deb's path last.
set -euo pipefail
cd "$(dirname "$0")/.."

MLXR="${1:-target/release/mlxr}"
DESKTOP="${2:-app/desktop/target/release/mlxr-desktop}"
OUT="${3:-dist}"
for bin in "$MLXR" "$DESKTOP"; do
    [ -x "$bin" ] || { echo "build-deb: $bin missing or not executable" >&2; exit 1; }
done
VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
[ -n "$VERSION" ] || { echo "build-deb: no version in Cargo.toml" >&2; exit 1; }
ARCH="$(dpkg --print-architecture)"

ROOT="$(mktemp -d)"
trap 'rm -rf "$ROOT"' EXIT
install -D -m 0755 "$MLXR" "$ROOT/usr/bin/mlxr"
install -D -m 0755 "$DESKTOP" "$ROOT/usr/bin/mlxr-desktop"
# The release builds keep line tables for backtraces; the package does not.
strip --strip-debug "$ROOT/usr/bin/mlxr" "$ROOT/usr/bin/mlxr-desktop"
install -D -m 0644 app/ui/public/favicon.svg "$ROOT/usr/share/icons/hicolor/scalable/apps/mlxr.svg"
install -D -m 0644 app/desktop/packaging/mlxr.desktop "$ROOT/usr/share/applications/mlxr.desktop"
install -D -m 0644 README.md "$ROOT/usr/share/doc/mlxr/README.md"
SIZE="$(du -sk "$ROOT/usr" | cut -f1)"
mkdir -p "$ROOT/DEBIAN"
cat > "$ROOT/DEBIAN/control" <<CONTROL
Package: mlxr
Version: $VERSION
Architecture: $ARCH
Maintainer: MLXR developers <mlxr@localhost>
Installed-Size: $SIZE
Depends: libc6, libgtk-3-0, libwebkit2gtk-4.1-0, libayatana-appindicator3-1, libxdo3
Section: utils
Priority: optional
Description: local LLM inference engine and daemon, with a desktop app
 mlxr runs GGUF models on the CPU (and CUDA where built with it) behind
 Ollama- and OpenAI-compatible APIs; mlxr-desktop shows its web UI in a
 window and its state in the tray, talking to the daemon over a Unix socket.
CONTROL
mkdir -p "$OUT"
DEB="$OUT/mlxr_${VERSION}_${ARCH}.deb"
# gzip: xz takes minutes on 2 busy cores for a few MB less.
dpkg-deb --root-owner-group -Zgzip --build "$ROOT" "$DEB" >/dev/null
echo "$DEB"
