# Sourced by the bench scripts that run mlxr and start servers, after
# bench/host.sh, from the repository root:
# - mlxr_binary sets MLXR (the binary to run) and built (how the results
#   header names it): MLXR_BIN, an mlxr binary built elsewhere (e.g. from a
#   clean checkout while the working tree is mid-edit; BENCH_NOTE describes
#   it), else the working tree, built now;
# - server_scratch makes the scratch folder `work`, removed on exit with the
#   server still running, if any; start one server at a time in the
#   background, `server_pid=$!`, log to "$work/server.log", then
#   `wait_ready URL` and, when done, `stop_server`.

mlxr_binary() {
  if [ -n "${MLXR_BIN:-}" ]; then
    MLXR="$MLXR_BIN"
    built="mlxr binary \`$MLXR_BIN\`${BENCH_NOTE:+ ($BENCH_NOTE)}"
  else
    cargo build --release -p mlxr >&2
    MLXR="$root/target/release/mlxr"
    built="commit \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates || echo ' (with uncommitted changes under crates/)')"
  fi
}

server_scratch() {
  work="$(mktemp -d)"
  server_pid=""
  trap 'stop_server; rm -rf "$work"' EXIT
}

stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}

# Waits up to 60 s for URL/health; stops the script with the server's log if
# the server exits first.
wait_ready() {  # url
  for _ in $(seq 1 600); do
    if curl -sf "$1/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$server_pid" 2>/dev/null || { echo "server exited; log:" >&2; cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "server at $1 not ready after 60 s" >&2; exit 1
}
