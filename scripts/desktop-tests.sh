#!/usr/bin/env bash
# Tests of the desktop app (app/desktop), as CI's "desktop app" stage:
#  1. its Debian build packages (installed with apt-get when missing);
#  2. cargo fmt --check, clippy -D warnings, the unit tests and the release
#     build of app/desktop (its own workspace and target directory);
#  3. the app under Xvfb with a private D-Bus session and a minimal tray
#     host (scripts/desktop/sni.py; window.py closes the window as a window
#     manager would): against a fresh MLXR_HOME it starts
#     `mlxr serve --socket PATH --no-tcp`, shows the UI (a screenshot, kept
#     and checked not to be blank), a chat reply from SmolLM2 streams
#     through the socket bridge (the real UI driven by
#     scripts/desktop/chat-test.js), a 256 MiB upload from the page streams
#     through the bridge to the daemon's blob store (the app's memory peak
#     measured) and an aborted one leaves nothing, the tray item and its
#     menu are on D-Bus, the tray shows a model load as loading, the menu's
#     Stop/Start stop and start the daemon, Launch at login writes and
#     removes the systemd user unit, Quit leaves no process behind;
#  4. the .deb (scripts/build-deb.sh) installs, mlxr --version and the
#     desktop entry work, and removing it removes them.
# Needs target/release/mlxr (or MLXR_BIN) built with the UI embedded, and
# SmolLM2 and the two Qwen2.5-Coder models from scripts/fetch-models.sh. Every failure stops the script with
# a message; nothing is skipped. Prints each step's time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

BIN="$(realpath "${MLXR_BIN:-$ROOT/target/release/mlxr}")"
MODELS_DIR="${MLXR_MODELS_DIR:-$HOME/.cache/mlxr/models}"
MODEL_FILE="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
# Loaded in turn for the tray's loading state (the largest models here).
LOAD_MODELS=(qwen-1.5b:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf qwen-0.5b:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)
# The page's upload through the bridge.
UPLOAD_BYTES=$((256 << 20))
ARTIFACTS="${MLXR_DESKTOP_ARTIFACTS:-$ROOT/target/desktop-tests}"
DESKTOP="$ROOT/app/desktop/target/release/mlxr-desktop"

fail() { echo "desktop-tests: FAILED: $*" >&2; exit 1; }
[ -x "$BIN" ] || fail "$BIN missing: cargo build --release -p mlxr"
[ -f "$MODEL_FILE" ] || fail "$MODEL_FILE missing: run scripts/fetch-models.sh"
for m in "${LOAD_MODELS[@]}"; do
    [ -f "$MODELS_DIR/${m#*:}" ] || fail "$MODELS_DIR/${m#*:} missing: run scripts/fetch-models.sh"
done

T0=$SECONDS
step() {
    local name="$1" t=$SECONDS
    shift
    echo "== $name"
    "$@"
    printf '   %ds  %s\n' $((SECONDS - t)) "$name"
}

packages() {
    local need=(xvfb dbus-daemon dbus-x11 libwebkit2gtk-4.1-dev libayatana-appindicator3-dev libxdo-dev
                python3-gi python3-xlib imagemagick x11-utils curl iproute2 procps binutils desktop-file-utils)
    local missing=()
    for p in "${need[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "ok installed" >/dev/null || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
        [ "$(id -u)" = 0 ] || apt=(sudo "${apt[@]}")
        echo "installing ${missing[*]}"
        "${apt[@]}" update -qq || fail "apt-get update"
        "${apt[@]}" install -y -qq "${missing[@]}" >/dev/null || fail "apt-get install ${missing[*]}"
    else
        echo "all installed: ${need[*]}"
    fi
}

cargo_checks() {
    (
        cd app/desktop
        timed() { local t=$SECONDS; "$@"; printf '   %ds  %s\n' $((SECONDS - t)) "$*"; }
        timed cargo fmt -- --check
        timed cargo clippy --release --all-targets -j2 -- -D warnings
        timed cargo test --release -j2
        timed cargo build --release -j2
    )
}

# ---- the running app ----
TMP="$(mktemp -d)"
PIDS=()
cleanup() {
    local rc=$?
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill -TERM "${PIDS[$i]}" 2>/dev/null || true
    done
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    if [ "$rc" != 0 ]; then
        mkdir -p "$ARTIFACTS"
        for f in app.log app2.log app3.log report.txt sni.log notify.log notifications; do
            [ -f "$TMP/$f" ] && cp "$TMP/$f" "$ARTIFACTS/" || true
        done
        [ -f "$TMP/home/mlxr-desktop-serve.log" ] && cp "$TMP/home/mlxr-desktop-serve.log" "$ARTIFACTS/" || true
        echo "desktop-tests: logs kept in $ARTIFACTS" >&2
        [ -f "$TMP/app.log" ] && tail -n 40 "$TMP/app.log" >&2 || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# The app's HOME too is fresh (Launch at login writes under it).
export MLXR_HOME="$TMP/home" XDG_RUNTIME_DIR="$TMP/run"
USER_HOME="$TMP/user"
mkdir -p "$MLXR_HOME" "$XDG_RUNTIME_DIR" "$USER_HOME"
chmod 700 "$XDG_RUNTIME_DIR"
SOCK="$MLXR_HOME/mlxr.sock"
SERVE_LOG="$MLXR_HOME/mlxr-desktop-serve.log"
APP_PID=""

wait_for() { # SECONDS WHAT COMMAND...
    local secs=$1 what=$2
    shift 2
    for _ in $(seq $((secs * 10))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "timed out after ${secs}s waiting for $what"
}
answers() { curl -sf --max-time 2 --unix-socket "$SOCK" http://mlxr/health >/dev/null; }
not_answering() { ! answers; }
# The daemon on SOCK, whichever mlxr binary runs it.
daemon_pid() { pgrep -f -x ".*/mlxr serve --socket $SOCK --no-tcp"; }
no_daemon() { ! daemon_pid; }
# Exited (a zombie until this script reaps it).
app_exited() { local s; s="$(ps -o stat= -p "$APP_PID")" || return 0; [[ $s == Z* ]]; }
plain_log() { sed 's/\x1b\[[0-9;]*m//g' "$SERVE_LOG"; }

session() {
    local display=99
    while [ -e "/tmp/.X11-unix/X$display" ] || [ -e "/tmp/.X$display-lock" ]; do display=$((display + 1)); done
    Xvfb ":$display" -screen 0 1280x900x24 -nolisten tcp >"$TMP/xvfb.log" 2>&1 &
    PIDS+=($!)
    export DISPLAY=":$display"
    wait_for 20 "Xvfb on $DISPLAY" xdpyinfo
    local bus
    bus="$(dbus-daemon --session --fork --print-address=1 --print-pid=1 --nopidfile)"
    DBUS_SESSION_BUS_ADDRESS="$(echo "$bus" | sed -n 1p)"
    export DBUS_SESSION_BUS_ADDRESS
    PIDS+=("$(echo "$bus" | sed -n 2p)")
    /usr/bin/python3 scripts/desktop/sni.py watcher "$TMP/items" >"$TMP/sni.log" 2>&1 &
    PIDS+=($!)
    wait_for 20 "the StatusNotifierWatcher" grep -q "org.kde.StatusNotifierWatcher ready" "$TMP/sni.log"
    /usr/bin/python3 scripts/desktop/sni.py notifications "$TMP/notifications" >"$TMP/notify.log" 2>&1 &
    PIDS+=($!)
    wait_for 20 "the notification server" grep -q "org.freedesktop.Notifications ready" "$TMP/notify.log"
    echo "Xvfb $DISPLAY, session bus $DBUS_SESSION_BUS_ADDRESS, tray host and notification server up"
}

# The user has a model: registered through a daemon on the same home (over
# its socket, as `mlxr create` talks to the daemon), which is then stopped.
register_model() {
    "$BIN" serve --socket "$SOCK" --no-tcp >"$TMP/setup.log" 2>&1 &
    local pid=$!
    wait_for 60 "the setup daemon" answers
    printf 'FROM %s\nPARAMETER temperature 0\nPARAMETER num_predict 48\n' "$MODEL_FILE" >"$TMP/Modelfile"
    MLXR_HOST="unix:$SOCK" "$BIN" create smollm2 -f "$TMP/Modelfile"
    kill -TERM "$pid"
    wait "$pid" || fail "the setup daemon exited with $?"
    [ ! -e "$SOCK" ] || fail "the setup daemon left its socket"
}

launch() {
    # The page script pulls this copy from a local path (the app's daemon
    # allows that through its config file, which it finds in MLXR_CONFIG).
    cp "$MODEL_FILE" "$TMP/desktop-pull.gguf"
    printf 'allow_local_pulls = true\n' >"$TMP/serve.toml"
    # The page's go-ahead for its upload: this blob, stored by upload().
    printf 'mlxr-desktop-tests: go\n' >"$TMP/go"
    GO_DIGEST="$(sha256sum "$TMP/go" | cut -d' ' -f1)"
    { printf 'window.__mlxrTest = { pullSource: %s, goDigest: "%s", uploadBytes: %d };\n' \
          "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$TMP/desktop-pull.gguf")" "$GO_DIGEST" "$UPLOAD_BYTES"
      cat scripts/desktop/chat-test.js; } >"$TMP/page-test.js"
    HOME="$USER_HOME" MLXR_BIN="$BIN" MLXR_CONFIG="$TMP/serve.toml" MLXR_DESKTOP_TEST_JS="$TMP/page-test.js" \
        MLXR_DESKTOP_TEST_REPORT="$TMP/report.txt" "$DESKTOP" >"$TMP/app.log" 2>&1 &
    APP_PID=$!
    PIDS+=("$APP_PID")
    wait_for 90 "the app's daemon on $SOCK" answers
    local pid
    pid="$(daemon_pid)" || fail "no 'mlxr serve --socket $SOCK --no-tcp' process"
    [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$APP_PID" ] || fail "the daemon is not the app's child"
    plain_log | grep "no TCP listener" >/dev/null || fail "the daemon did not say it has no TCP listener"
    if ss -ltnpH | grep "pid=$pid," >/dev/null; then fail "the daemon listens on TCP: $(ss -ltnpH | grep "pid=$pid,")"; fi
    echo "daemon pid $pid: the app's child, Unix socket only"
}

chat() {
    wait_for 240 "the page test's chat and pull" grep -q "^UPLOAD waiting\|^FAIL" "$TMP/report.txt"
    cat "$TMP/report.txt"
    grep -q "^UPLOAD waiting" "$TMP/report.txt" || fail "the page test (chat and pull through the socket bridge)"
    # The daemon has no TCP listener: the requests came over the socket.
    plain_log | grep 'path="/api/chat" status=200' >/dev/null || fail "the daemon did not log POST /api/chat 200"
    plain_log | grep 'path="/api/pull" status=200' >/dev/null || fail "the daemon did not log POST /api/pull 200"
    wait_for 10 "the pull's notification" grep -q "^Model pulled" "$TMP/notifications"
    cat "$TMP/notifications"
    grep -qxF "Model pulled	$TMP/desktop-pull.gguf is ready to use." "$TMP/notifications" \
        || fail "the notification does not name the pulled model"
}

screenshot() {
    mkdir -p "$ARTIFACTS"
    local shot="$ARTIFACTS/desktop-window.png"
    import -window root "$shot"
    local colors sd
    colors="$(convert "$shot" -format '%k' info:)"
    sd="$(convert "$shot" -colorspace Gray -format '%[fx:standard_deviation]' info:)"
    echo "screenshot: $shot ($colors colors, gray standard deviation $sd)"
    [ "$colors" -ge 64 ] || fail "the screenshot is (nearly) blank: $colors colors"
    awk -v sd="$sd" 'BEGIN { exit !(sd > 0.05) }' || fail "the screenshot is (nearly) uniform: sd $sd"
    # The window's title and icon, as a window manager would see them.
    # (Whole outputs in variables: `grep -q` or `head` ending a pipe early
    # would fail the writer with SIGPIPE under pipefail; the pipes into grep
    # elsewhere read all their input for the same reason.)
    local tree icon
    tree="$(xwininfo -root -tree)"
    grep -q '"MLXR": ("mlxr-desktop"' <<<"$tree" || fail "no window titled MLXR (class mlxr-desktop)"
    icon="$(xprop -name MLXR _NET_WM_ICON)"
    icon="${icon:0:200}"
    [[ $icon == "_NET_WM_ICON(CARDINAL) = "* ]] || fail "the window has no icon: $icon"
    echo "window 'MLXR' with its icon (${icon:0:60}…)"
}

vm() { # FIELD: the app's /proc status line FIELD (VmHWM, VmRSS) in kB
    awk -v f="$1:" '$1 == f { print $2 }' "/proc/$APP_PID/status"
}

upload() {
    # The app's memory peak starts from now (clear_refs 5 resets VmHWM to
    # the resident size); then the page gets its go-ahead.
    echo 5 >"/proc/$APP_PID/clear_refs"
    local base peak digest stored cut
    base="$(vm VmHWM)"
    curl -sf --unix-socket "$SOCK" --data-binary "@$TMP/go" "http://mlxr/api/blobs/sha256:$GO_DIGEST" >/dev/null \
        || fail "storing the go-ahead blob"
    wait_for 300 "the page's upload" grep -q "^PASS\|^FAIL" "$TMP/report.txt"
    peak="$(vm VmHWM)"
    grep "^UPLOAD \|^ABORT \|^PASS\|^FAIL" "$TMP/report.txt"
    grep -q "^PASS" "$TMP/report.txt" || fail "the page test (upload through the socket bridge)"
    digest="$(sed -n 's/^UPLOAD [0-9]* bytes sha256:\([0-9a-f]*\) .*/\1/p' "$TMP/report.txt")"
    [ -n "$digest" ] || fail "the page did not report its upload's digest"
    # The daemon stored exactly the page's bytes.
    stored="$MLXR_HOME/blobs/sha256-$digest"
    [ -f "$stored" ] || fail "no blob file $stored"
    [ "$(stat -c %s "$stored")" = "$UPLOAD_BYTES" ] || fail "the stored blob has $(stat -c %s "$stored") bytes, not $UPLOAD_BYTES"
    [ "$(sha256sum "$stored" | cut -d' ' -f1)" = "$digest" ] || fail "the stored blob's sha256 is not the page's"
    plain_log | grep 'path="/api/blobs/sha256:'"$digest"'" status=201' >/dev/null \
        || fail "the daemon did not log POST /api/blobs/sha256:$digest 201"
    # The aborted upload left no blob and no temporary file.
    cut="$(sed -n 's/^ABORT .* sha256:\([0-9a-f]*\)$/\1/p' "$TMP/report.txt")"
    [ -n "$cut" ] || fail "the page did not report its aborted upload"
    no_temp_blobs() { ! compgen -G "$MLXR_HOME/blobs/tmp-*" >/dev/null; }
    wait_for 20 "the aborted upload's temporary file to go" no_temp_blobs
    [ ! -e "$MLXR_HOME/blobs/sha256-$cut" ] || fail "the aborted upload was stored"
    echo "the app's memory: VmHWM $((base / 1024)) MiB before the upload, peak $((peak / 1024)) MiB during it" \
        "(+$(((peak - base) / 1024)) MiB for a $((UPLOAD_BYTES >> 20)) MiB file)"
    # Whole in one message, the body would have been held at least twice
    # (base64 and bytes); piece by piece the peak stays below the file's
    # size, and grows by a few pieces' worth, not by the file.
    [ $((peak * 1024)) -lt "$UPLOAD_BYTES" ] \
        || fail "the app's memory peaked at $((peak / 1024)) MiB during a $((UPLOAD_BYTES >> 20)) MiB upload"
    [ $(((peak - base) * 1024)) -lt $((UPLOAD_BYTES / 4)) ] \
        || fail "the app's memory grew by $(((peak - base) / 1024)) MiB during a $((UPLOAD_BYTES >> 20)) MiB upload"
}

ITEM_NAME="" ITEM_PATH=""
sni() { /usr/bin/python3 scripts/desktop/sni.py "$@"; }
entry() { # LABEL -> its JSON line
    sni menu "$ITEM_NAME" "$ITEM_PATH" | grep -F "\"label\": \"$1"
}
window_is() { [ "$(/usr/bin/python3 scripts/desktop/window.py state MLXR)" = "$1" ]; }
entry_has() { entry "$1" | grep -F "$2" >/dev/null; }

tray() {
    wait_for 20 "a tray item on D-Bus" test -s "$TMP/items"
    read -r ITEM_NAME ITEM_PATH < <(tail -n 1 "$TMP/items")
    echo "tray item $ITEM_NAME $ITEM_PATH"
    sni menu "$ITEM_NAME" "$ITEM_PATH" | tee "$TMP/menu.json"
    for label in "Open MLXR" "Pull a model…" "Start the engine" "Stop the engine" "Launch at login" "Quit MLXR"; do
        grep -qF "\"label\": \"$label\"" "$TMP/menu.json" || fail "the tray menu has no '$label'"
    done
    wait_for 10 "the status 'MLXR is running'" entry_has "MLXR is running" '"label"'
    entry_has "Stop the engine" '"enabled": true' || fail "Stop is not enabled while running"
    entry_has "Start the engine" '"enabled": false' || fail "Start is enabled while running"
    grep -qF '"label": "Loaded: smollm2:latest' "$TMP/menu.json" \
        || fail "the tray does not show the loaded model"
    # Closing the window hides it (the app stays in the tray); Open shows it.
    /usr/bin/python3 scripts/desktop/window.py close MLXR
    wait_for 10 "the window to hide" window_is unmapped
    [ -d "/proc/$APP_PID" ] && ! app_exited || fail "closing the window ended the app"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Open MLXR"
    wait_for 10 "Open MLXR to show the window" window_is viewable
    echo "closing the window hid it; Open MLXR showed it again"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Pull a model…"
    wait_for 20 "Pull a model… to open the Models page" grep -qx "loaded mlxr://localhost/ui/models" "$TMP/report.txt"
    echo "Pull a model… opened mlxr://localhost/ui/models"
}

icon_dot() { # the tray icon's status dot, "R,G,B"
    local icon
    icon="$(sni props "$ITEM_NAME" "$ITEM_PATH" | python3 -c 'import json, sys; print(json.load(sys.stdin)["icon_file"])')"
    convert "$icon" -format '%[fx:int(255*p{24,24}.r+0.5)],%[fx:int(255*p{24,24}.g+0.5)],%[fx:int(255*p{24,24}.b+0.5)]' info:
}

loading() {
    # Registered only now, through the app's daemon: the chat above finds
    # SmolLM2 as the UI's only model.
    local m
    for m in "${LOAD_MODELS[@]}"; do
        printf 'FROM %s\n' "$MODELS_DIR/${m#*:}" >"$TMP/Modelfile"
        MLXR_HOST="unix:$SOCK" "$BIN" create "${m%%:*}" -f "$TMP/Modelfile" >/dev/null
    done
    [ "$(icon_dot)" = "47,158,68" ] || fail "the running icon's dot is $(icon_dot), not green"
    # One load can be shorter than the tray's poll (1.5 s): requests for
    # three models in turn through the daemon's two-model cap
    # (--max-loaded-models, default 2) make every request a load, each
    # evicting the least recently used model, several seconds in all.
    (
        for m in "${LOAD_MODELS[@]%%:*}" smollm2 "${LOAD_MODELS[@]%%:*}"; do
            curl -sf --max-time 120 --unix-socket "$SOCK" http://mlxr/api/generate -H 'Content-Type: application/json' \
                -d "{\"model\":\"$m\",\"prompt\":\"\",\"stream\":false}" >/dev/null || exit 1
        done
    ) &
    local loads=$! t=$SECONDS
    PIDS+=("$loads")
    wait_for 120 "the status 'MLXR is loading a model…'" entry_has "MLXR is loading a model…" '"label"'
    local dot
    dot="$(icon_dot)"
    echo "loading seen after $((SECONDS - t))s: $(entry "MLXR is") icon dot $dot"
    [ "$dot" = "240,140,0" ] || fail "the icon's dot while loading is $dot, not amber"
    entry_has "Stop the engine" '"enabled": true' || fail "Stop is not enabled while loading"
    wait "$loads" || fail "the requests that load the models failed"
    echo "the loads took $((SECONDS - t))s"
    wait_for 20 "the status 'MLXR is running'" entry_has "MLXR is running" '"label"'
    local models
    models="$(entry "Loaded:")"
    echo "$models"
    for m in "${LOAD_MODELS[@]%%:*}"; do
        grep -qF "$m:latest" <<<"$models" || fail "the tray does not list $m after its load"
    done
    [ "$(icon_dot)" = "47,158,68" ] || fail "the icon's dot after the load is $(icon_dot), not green"
}

stop_start() {
    local before after old new
    before="$(sni props "$ITEM_NAME" "$ITEM_PATH")"
    old="$(daemon_pid)"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Stop the engine"
    wait_for 30 "the daemon to stop" no_daemon
    wait_for 10 "the socket to go" not_answering
    wait_for 10 "the status 'MLXR is stopped'" entry_has "MLXR is stopped" '"label"'
    entry_has "Start the engine" '"enabled": true' || fail "Start is not enabled while stopped"
    after="$(sni props "$ITEM_NAME" "$ITEM_PATH")"
    echo "icon running: $before; stopped: $after"
    local sha_before sha_after
    sha_before="$(echo "$before" | python3 -c 'import json, sys; print(json.load(sys.stdin)["icon_sha"])')"
    sha_after="$(echo "$after" | python3 -c 'import json, sys; print(json.load(sys.stdin)["icon_sha"])')"
    [ "$sha_before" != "$sha_after" ] || fail "the tray icon's pixels did not change with the state"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Start the engine"
    wait_for 60 "the daemon to start again" answers
    new="$(daemon_pid)"
    [ "$new" != "$old" ] || fail "the daemon did not restart"
    wait_for 10 "the status 'MLXR is running'" entry_has "MLXR is running" '"label"'
    echo "stopped $old, started $new"
}

launch_at_login() {
    local unit="$USER_HOME/.config/systemd/user/mlxr.service"
    local link="$USER_HOME/.config/systemd/user/default.target.wants/mlxr.service"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Launch at login"
    wait_for 10 "$unit" test -f "$unit"
    [ -L "$link" ] || fail "the unit is not enabled ($link)"
    grep -qxF "ExecStart=$BIN serve --socket $SOCK --no-tcp" "$unit" || { cat "$unit"; fail "the unit's ExecStart"; }
    grep -qxF "Environment=MLXR_HOME=$MLXR_HOME" "$unit" || { cat "$unit"; fail "the unit's MLXR_HOME"; }
    entry_has "Launch at login" '"toggle_state": 1' || fail "Launch at login is not checked"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Launch at login"
    wait_for 10 "the unit's removal" test ! -e "$unit"
    [ ! -e "$link" ] || fail "the enabling link stayed"
    echo "the unit was written, enabled and removed"
}

# None of PIDS runs any more.
all_gone() { local p; for p in "$@"; do [ ! -d "/proc/$p" ] || return 1; done; }

quit() {
    local daemon children
    daemon="$(daemon_pid)"
    # The daemon and WebKit's processes.
    children="$(pgrep -P "$APP_PID" | tr '\n' ' ')"
    echo "the app's children: $children"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Quit MLXR"
    wait_for 30 "the app to exit" app_exited
    wait "$APP_PID" || fail "the app exited with $?"
    # shellcheck disable=SC2086
    wait_for 10 "the app's children to end" all_gone $children
    [ ! -d "/proc/$daemon" ] || fail "the daemon $daemon outlived the app"
    no_daemon || fail "an mlxr serve on $SOCK is left: $(daemon_pid)"
    [ ! -e "$SOCK" ] || fail "the socket $SOCK is left"
    echo "the app and its daemon are gone"
}

join_running() {
    "$BIN" serve --socket "$SOCK" --no-tcp >"$TMP/own.log" 2>&1 &
    local own=$!
    PIDS+=("$own")
    wait_for 60 "a daemon started outside the app" answers
    local items_before
    items_before="$(wc -l <"$TMP/items")"
    HOME="$USER_HOME" MLXR_BIN="$BIN" "$DESKTOP" >"$TMP/app2.log" 2>&1 &
    APP_PID=$!
    PIDS+=("$APP_PID")
    more_items() { [ "$(wc -l <"$TMP/items")" -gt "$items_before" ]; }
    wait_for 30 "the second app's tray item" more_items
    read -r ITEM_NAME ITEM_PATH < <(tail -n 1 "$TMP/items")
    wait_for 20 "the status 'MLXR is running'" entry_has "MLXR is running" '"label"'
    if pgrep -x -P "$APP_PID" mlxr >/dev/null; then fail "the app started a daemon: $(pgrep -a -P "$APP_PID")"; fi
    # Stop is refused for a daemon the app did not start.
    sni click "$ITEM_NAME" "$ITEM_PATH" "Stop the engine"
    wait_for 10 "the app to say the daemon is not its own" grep -q "not started by this app" "$TMP/app2.log"
    answers || fail "Stop stopped a daemon the app did not start"
    sni click "$ITEM_NAME" "$ITEM_PATH" "Quit MLXR"
    wait_for 30 "the app to exit" app_exited
    wait "$APP_PID" || fail "the app exited with $?"
    answers || fail "quitting the app stopped a daemon it did not start"
    kill -TERM "$own"
    wait "$own" || fail "the outside daemon exited with $?"
    echo "joined the running daemon $own; Stop refused, Quit left it running"
}

deb() {
    local deb
    deb="$(scripts/build-deb.sh "$BIN" "$DESKTOP" "$TMP/dist" | tail -n 1)"
    echo "built $deb ($(du -h "$deb" | cut -f1))"
    dpkg-deb --contents "$deb" | awk '{print $6}'
    if dpkg-query -W -f='${Status}' mlxr 2>/dev/null | grep "ok installed" >/dev/null; then
        fail "a package named mlxr is installed already; not touching it"
    fi
    # dpkg itself, not apt-get: its dependencies are the runtime libraries
    # of the build packages above, so a missing one is an error here.
    local dpkg=(dpkg)
    [ "$(id -u)" = 0 ] || dpkg=(sudo dpkg)
    "${dpkg[@]}" -i "$deb" >/dev/null || fail "installing $deb"
    /usr/bin/mlxr --version || fail "the installed mlxr --version"
    /usr/bin/mlxr-desktop --version || fail "the installed mlxr-desktop --version"
    [ -f /usr/share/applications/mlxr.desktop ] || fail "the desktop entry is missing"
    grep -qx "Exec=mlxr-desktop" /usr/share/applications/mlxr.desktop || fail "the desktop entry's Exec"
    desktop-file-validate /usr/share/applications/mlxr.desktop || fail "desktop-file-validate"
    # Started as the desktop entry starts it: no MLXR_BIN, so the daemon is
    # the mlxr installed beside mlxr-desktop.
    local items_before
    items_before="$(wc -l <"$TMP/items")"
    HOME="$USER_HOME" env -u MLXR_BIN /usr/bin/mlxr-desktop >"$TMP/app3.log" 2>&1 &
    APP_PID=$!
    PIDS+=("$APP_PID")
    wait_for 60 "the installed app's daemon" answers
    pgrep -f -x "/usr/bin/mlxr serve --socket $SOCK --no-tcp" >/dev/null \
        || fail "the installed app did not start /usr/bin/mlxr: $(pgrep -a -P "$APP_PID")"
    more_items() { [ "$(wc -l <"$TMP/items")" -gt "$items_before" ]; }
    wait_for 30 "the installed app's tray item" more_items
    read -r ITEM_NAME ITEM_PATH < <(tail -n 1 "$TMP/items")
    quit
    echo "the installed mlxr-desktop ran /usr/bin/mlxr serve and quit cleanly"
    [ -f /usr/share/icons/hicolor/scalable/apps/mlxr.svg ] || fail "the icon is missing"
    "${dpkg[@]}" -r mlxr >/dev/null || fail "removing mlxr"
    for f in /usr/bin/mlxr /usr/bin/mlxr-desktop /usr/share/applications/mlxr.desktop \
        /usr/share/icons/hicolor/scalable/apps/mlxr.svg; do
        [ ! -e "$f" ] || fail "$f is left after removal"
    done
    echo "installed, checked and removed"
}

step "apt packages" packages
step "app/desktop: cargo fmt --check, clippy -D warnings, unit tests, release build" cargo_checks
step "Xvfb, a D-Bus session and a tray host" session
step "a model in the fresh MLXR_HOME (mlxr create over the socket)" register_model
step "launch mlxr-desktop: it starts mlxr serve --socket --no-tcp" launch
step "chat and pull: the UI's reply streams through the socket bridge; the pull notifies" chat
step "upload: $((UPLOAD_BYTES >> 20)) MiB from the page through the bridge to the blob store; an aborted one leaves nothing" upload
step "screenshot of the window" screenshot
step "tray: item and menu on D-Bus" tray
step "tray: a model load shows as loading, then running with the model" loading
step "tray: Stop, then Start the engine" stop_start
step "tray: Launch at login on, then off" launch_at_login
step "tray: Quit leaves no process behind" quit
step "a daemon already on the socket: the app joins it and leaves it running" join_running
step ".deb: build, install, start the installed app, remove" deb
echo "desktop-tests: all passed in $((SECONDS - T0))s; screenshot in $ARTIFACTS/desktop-window.png"
