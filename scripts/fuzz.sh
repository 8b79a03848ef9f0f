#!/usr/bin/env bash
# Builds every cargo-fuzz target of fuzz/ once, then runs each for
# MLXR_FUZZ_SECONDS (default 60) from its committed seeds (fuzz/seeds/<t>)
# and minimised corpus (fuzz/corpus-min/<t>), with its dictionary
# (fuzz/dicts/<t>.dict). New inputs go to a scratch folder; the committed
# ones are left as they are. Prints each step's time and each target's
# executions; exits non-zero when any target crashed (the input is kept in
# fuzz/artifacts/<t>/). Installs cargo-fuzz (~/.cargo/bin) when missing.
# Only a stable toolchain is needed: RUSTC_BOOTSTRAP=1 unlocks the flags
# cargo-fuzz passes.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

PER_TARGET="${MLXR_FUZZ_SECONDS:-60}"
export RUSTC_BOOTSTRAP=1
# The fuzz targets never serve the web UI: don't build it for them.
export MLXR_SKIP_UI_BUILD=1

step() {
    local t0=$SECONDS
    echo "== $1"
    shift
    "$@"
    echo "   ($((SECONDS - t0)) s)"
}

if ! cargo fuzz --version >/dev/null 2>&1; then
    step "install cargo-fuzz" cargo install cargo-fuzz --locked
fi
step "build every fuzz target (-s none -O)" cargo fuzz build -s none -O

SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
FAILED=()
RESULTS=()
run_target() {
    local t="$1" log="$SCRATCH/$1.log" dirs=() rc=0
    mkdir -p "$SCRATCH/$t"
    for d in "seeds/$t" "corpus-min/$t"; do
        [ -d "$d" ] && dirs+=("$d")
    done
    local dict=()
    [ -f "dicts/$t.dict" ] && dict=("-dict=dicts/$t.dict")
    cargo fuzz run -s none -O "$t" "$SCRATCH/$t" "${dirs[@]}" -- \
        -max_total_time="$PER_TARGET" -timeout=25 -print_final_stats=1 "${dict[@]}" \
        >"$log" 2>&1 || rc=$?
    local execs
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    RESULTS+=("$(printf '%-20s %12s execs  %s' "$t" "${execs:-?}" \
        "$([ "$rc" = 0 ] && echo ok || echo "CRASH (exit $rc)")")")
    if [ "$rc" != 0 ]; then
        FAILED+=("$t")
        tail -n 40 "$log"
    fi
}
for t in $(cargo fuzz list); do
    step "fuzz $t for ${PER_TARGET} s" run_target "$t"
done

echo "== executions per target"
printf '%s\n' "${RESULTS[@]}"
if [ "${#FAILED[@]}" -gt 0 ]; then
    echo "crashed: ${FAILED[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
