#!/usr/bin/env bash
# The GPU test-and-bench session, run on the device machine (an H200, CUDA 13
# driver, PyTorch's CUDA libraries, no Rust, no network) from binaries built
# here by scripts/build-cuda.sh and carried in dist/:
#
#   dist/cuda/mlxr.xz, dist/cuda/gpu.xz   mlxr and the GPU test (xz)
#   dist/llama.cpp.tar.xz                 llama.cpp from the pinned sdist
#                                         (trimmed: scripts/gpu-carry.sh)
#   dist/vocabs/ggml-vocab-*.gguf          tokenizers for the random models
#
# Prints a pass/fail summary last. Stages (each optional, in order):
#   test   tests/gpu on the tiny models and random real-shaped GGUFs
#   serve  mlxr serve --device cuda answering HTTP (plain, streamed, aborted)
#   spec   greedy tokens with speculative decoding (lookup, self-draft)
#          equal those without, on CUDA
#   structured  decode under a JSON schema beside free decode on CUDA
#          (bench/structured.py; GPU_STRUCTURED models), grammar masks
#          computed lazily and ahead
#   ncu    hardware counters of one decode step's kernels (GPU_NCU model) and
#          of the decode matmul kernels alone (GPU_NCU_KERNELS, ncu's -k:
#          regex:mmvq by default, regex:mmvq8 for the 5-8-token ones, none:
#          skipped)
#   ncu-prefill  ncu's time of the prefill attention kernels of a 512-token
#          prefill (GPU_NCU_PREFILL model), with each of them
#   bench  mlxr bench --device cuda (and llama-bench on the same files when
#          llama.cpp was built: stage llama); GPU_PREFILL="flash" also times
#          pp512 with that prefill attention kernel; GPU_DEPTH="1024" also
#          decode from that depth (both engines), GPU_DECODE_ENV="KNOB=V ..."
#          mlxr's decode under each setting, GPU_BENCH_ENV="KNOB=V ..." its
#          prefill and decode under each
#   batched  aggregate speed of 1, 8, 64 and 256 sequences served together:
#          mlxr bench --parallel beside llama-batched-bench (GPU_BATCHED models;
#          GPU_BATCHED_ENV="MLXR_CUDA_F16_GEMM_ROWS=8 MLXR_CUDA_QUANT_ROWS=4":
#          also mlxr under each of those settings (A=1,B=2: both at once),
#          run while llama.cpp still
#          compiles, or after it with the test stage)
#   serving  GPU_SERVING_STREAMS (64) streaming HTTP clients (bench/serving.py,
#          /v1/completions, 128 tokens each) against llama-server -np N and
#          mlxr serve --device cuda on the GPU_SERVING model (llama8b-q4_k_m)
#   folders  Hugging Face folders on the GPU: the GPU_FOLDERS model (a random
#          F16 GGUF, default qwen1.5b-f16) converted by `mlxr convert` to F16
#          and BF16 folders and by bench/fp8_nf4_folders.py to FP8 and NF4
#          (the machine's ml_dtypes and safetensors), each benchmarked
#          (mlxr bench --device cuda) beside the same shape's Q8_0 GGUF
#   profile  the decode matmul kernels timed alone, then each op's time per
#          decode step (tests/gpu --profile) on the GPU_BENCH models, of one
#          sequence and of each of GPU_PROFILE_SEQS (e.g. "16 64") together
#          (GPU_BENCH_KERNELS=0: without the kernels alone)
# GPU_STAGES="llama test serve bench" by default; GPU_MODELS picks the random
# models (see random-gguf.py), GPU_BENCH the ones benchmarked (GPU_PROFILE
# profiled, by default the same; GPU_MATVEC="block" also times decode with
# that matmul shape; GPU_BENCH_PROMPTS the prompt lengths, default 512, e.g.
# "512,4096" for a long prompt's first token too). Writes logs to
# $OUT when set. GPU_TEST_TIMEOUT bounds the test stage (seconds).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gpu-out}
WORK=${GPU_WORK:-/tmp/mlxr-gpu}
STAGES=${GPU_STAGES:-llama test serve bench}
mkdir -p "$OUT" "$WORK/models" "$WORK/bin"
T0=$(date +%s)
SUMMARY=()
stage() { printf '\n== %s (%ss)\n' "$1" "$(($(date +%s) - T0))"; }
result() { SUMMARY+=("$(printf '%-4s %s' "$1" "$2")"); }
has() { [[ " $STAGES " == *" $1 "* ]]; }

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv
lscpu | grep -E '^Model name|^CPU\(s\)' | sed 's/  */ /g'
echo "commit $(cat "$ROOT/dist/COMMIT" 2>/dev/null || echo unknown)"

# PyTorch's CUDA wheels hold the runtime libraries mlxr links (cuBLAS,
# cuRAND, cudart); the driver's libcuda.so.1 is on the loader path already.
libs=$(python3 - <<'EOF'
import glob, os, site
dirs = set()
for base in site.getsitepackages():
    for name in ("libcublas.so.*", "libcublasLt.so.*", "libcurand.so.*", "libcudart.so.*"):
        for path in glob.glob(os.path.join(base, "nvidia", "**", name), recursive=True):
            dirs.add(os.path.dirname(path))
print(":".join(sorted(dirs)))
EOF
)
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

unxz_to() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
unxz_to "$ROOT/dist/cuda/mlxr.xz" "$WORK/bin/mlxr"
[[ -f $ROOT/dist/cuda/gpu.xz ]] && unxz_to "$ROOT/dist/cuda/gpu.xz" "$WORK/bin/gpu"
MLXR=$WORK/bin/mlxr
$MLXR --version

LLAMA=$WORK/llama.cpp
if [[ -f $ROOT/dist/llama.cpp.tar.xz && ! -d $LLAMA ]]; then
    mkdir -p "$LLAMA" && tar -xJf "$ROOT/dist/llama.cpp.tar.xz" -C "$LLAMA" --strip-components=1
fi
export PYTHONPATH=$LLAMA/gguf-py

# llama.cpp's CUDA build runs in the background while the models are made
# and the correctness tests run; the benchmarks wait for it.
if has llama && [[ -d $LLAMA ]]; then
    (
        cmake -S "$LLAMA" -B "$LLAMA/build" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER="$(has serving && echo ON || echo OFF)" \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
            -DCMAKE_BUILD_TYPE=Release -Wno-dev &&
            cmake --build "$LLAMA/build" -j 16 --target llama-bench llama-batched-bench \
                $(has serving && echo llama-server)
    ) >"$OUT/llama-build.log" 2>&1 &
    LLAMA_PID=$!
fi

stage "random-weight models (scripts/random-gguf.py)"
declare -A MODEL
make_model() { # name shape type vocab
    local path=$WORK/models/$1.gguf
    MODEL[$1]=$path
    [[ -f $path ]] || python3 "$ROOT/scripts/random-gguf.py" "$2" "$3" "$path" \
        --vocab-from "$ROOT/dist/vocabs/ggml-vocab-$4.gguf" &
}
for m in ${GPU_MODELS:-smollm2-q8_0 qwen1.5b-q4_k_m llama8b-q4_k_m}; do
    case $m in
    smollm2-q8_0) make_model "$m" smollm2-135m q8_0 starcoder ;;
    smollm2-q4_1) make_model "$m" smollm2-135m q4_1 starcoder ;;
    smollm2-f16) make_model "$m" smollm2-135m f16 starcoder ;;
    qwen1.5b-f16) make_model "$m" qwen2.5-1.5b f16 qwen2 ;;
    qwen1.5b-q8_0) make_model "$m" qwen2.5-1.5b q8_0 qwen2 ;;
    qwen1.5b-q4_k_m) make_model "$m" qwen2.5-1.5b q4_k_m qwen2 ;;
    llama8b-q4_k_m) make_model "$m" llama3-8b q4_k_m starcoder ;;
    llama8b-f16) make_model "$m" llama3-8b f16 starcoder ;;
    esac
done
wait_models() { for job in $(jobs -p); do [[ $job == "${LLAMA_PID:-}" ]] || wait "$job"; done; }
wait_models

if has test && [[ -x $WORK/bin/gpu ]]; then
    stage "tests/gpu: CUDA vs CPU backend"
    small=()
    for m in smollm2-q8_0 smollm2-q4_1 smollm2-f16 qwen1.5b-q4_k_m; do [[ -n ${MODEL[$m]:-} ]] && small+=("${MODEL[$m]}"); done
    if timeout "${GPU_TEST_TIMEOUT:-1800}" "$WORK/bin/gpu" "$ROOT/tests/fixtures/tiny-models" "${small[@]}" 2>&1 |
        tee "$OUT/gpu-test.log"; then
        result PASS "tests/gpu ($(grep -c ' rows, ' "$OUT/gpu-test.log") models)"
    else
        result FAIL "tests/gpu: $(grep -c '^FAIL' "$OUT/gpu-test.log") failed (gpu-test.log)"
    fi
fi

if has serve && [[ -n ${MODEL[smollm2-q8_0]:-} ]]; then
    stage "mlxr serve --device cuda over HTTP"
    port=18435
    "$MLXR" serve --device cuda --home "$WORK/home" --host 127.0.0.1:$port \
        -m "${MODEL[smollm2-q8_0]}" --name random >"$OUT/serve.log" 2>&1 &
    serve_pid=$!
    if python3 "$ROOT/scripts/gpu-serve-check.py" "http://127.0.0.1:$port" random 2>&1 | tee "$OUT/serve-check.log"; then
        result PASS "mlxr serve --device cuda (serve-check.log)"
    else
        result FAIL "mlxr serve --device cuda (serve-check.log, serve.log)"
    fi
    kill "$serve_pid" 2>/dev/null
    wait "$serve_pid" 2>/dev/null
fi

# Speculative decoding on the GPU: greedy tokens with prompt lookup and with
# the model drafting for itself must equal those without (the verify rows
# run the same batch-invariant kernels as plain decode rows); prints the
# draft counts. The self-draft drafts with --draft-p-min 0: a random-weight
# model's distributions are flat, and at the default 0.75 it drafts nothing.
if has spec; then
    stage "speculative decoding on CUDA: the same greedy tokens"
    prompt="one two three four five one two three four five one two three four five one two three"
    for m in smollm2-q8_0 smollm2-q4_1 qwen1.5b-q4_k_m; do
        [[ -n ${MODEL[$m]:-} ]] || continue
        gen() { "$MLXR" generate --device cuda -m "${MODEL[$m]}" --temperature 0 -n 96 --json "$@" "$prompt"; }
        gen >"$OUT/spec-$m-plain.json" 2>"$OUT/spec-$m.err"
        gen --spec-type ngram --draft-max 4 --draft-length max >"$OUT/spec-$m-ngram.json" 2>>"$OUT/spec-$m.err"
        gen --spec-type ngram --draft-max 8 >"$OUT/spec-$m-ngram-goodput.json" 2>>"$OUT/spec-$m.err"
        gen --model-draft "${MODEL[$m]}" --draft-max 6 --draft-length max --draft-p-min 0 >"$OUT/spec-$m-draft.json" 2>>"$OUT/spec-$m.err"
        if python3 - "$OUT" "$m" <<'PY'; then
import json, sys
out, m = sys.argv[1:]
runs = {v: json.load(open(f"{out}/spec-{m}-{v}.json")) for v in ("plain", "ngram", "ngram-goodput", "draft")}
ok = True
for v in ("plain", "ngram", "ngram-goodput", "draft"):
    t = runs[v]["timings"]
    same = runs[v]["tokens"] == runs["plain"]["tokens"]
    # The self-draft (p_min 0) must draft; prompt lookup drafts only where
    # the random model's output repeats an n-gram, and goodput's depend on
    # the timings.
    ok &= same and (t["draft_n"] > 0 or v != "draft")
    tps = t["predicted_n"] / t["predicted_ms"] * 1000
    print(f"{m} {v}: tokens {'equal' if same else 'DIFFER'}, {t['draft_n_accepted']} of {t['draft_n']} drafts stood, decode {tps:.1f} tok/s")
sys.exit(0 if ok else 1)
PY
            result PASS "speculative decoding on CUDA, $m"
        else
            result FAIL "speculative decoding on CUDA, $m (spec-$m.err)"
        fi
    done
fi

# Structured output on the GPU (bench/structured.py against mlxr serve):
# decode under a JSON schema beside free decode and the first token of a
# 50-property schema, with the grammar masks computed lazily and ahead
# (--grammar-masks). A random-weight model's greedy token is almost never
# one the schema allows, so every step needs every constrained sequence's
# mask: the worst case for lazy masks.
if has structured; then
    for m in ${GPU_STRUCTURED:-qwen1.5b-q4_k_m}; do
        [[ -n ${MODEL[$m]:-} ]] || continue
        for when in lazy ahead; do
            stage "structured output on CUDA: $m, --grammar-masks $when"
            port=18436
            "$MLXR" serve --device cuda --home "$WORK/home-structured" --host 127.0.0.1:$port \
                --max-num-seqs 16 --grammar-masks "$when" -m "${MODEL[$m]}" --name "$m" \
                >"$OUT/serve-structured-$m-$when.log" 2>&1 &
            pid=$!
            python3 - "http://127.0.0.1:$port/v1/models" <<'PY'
import sys, time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=2)
        break
    except OSError:
        time.sleep(0.5)
PY
            if timeout 300 python3 "$ROOT/bench/structured.py" --url "http://127.0.0.1:$port" \
                --model "$m" -c 1 16 -n 128 2>&1 | tee "$OUT/structured-$m-$when.log" &&
                grep -q ' 16 streams ' "$OUT/structured-$m-$when.log"; then
                result PASS "structured output on CUDA, $m, masks $when (structured-$m-$when.log)"
            else
                result FAIL "structured output on CUDA, $m, masks $when (structured-$m-$when.log)"
            fi
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
        done
    done
fi

# Hardware counters of the decode kernels (where the machine lets ncu read
# them): a step after 1,024 tokens, each kernel replayed alone. GPU times
# only, so it runs while llama.cpp compiles.
if has ncu && [[ -x $WORK/bin/gpu ]] && command -v ncu >/dev/null; then
    m=${GPU_NCU:-llama8b-q4_k_m}
    # Where warps wait: cycles per issued instruction, by reason.
    STALLS=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' \
        long_scoreboard short_scoreboard lg_throttle mio_throttle wait math_pipe_throttle \
        barrier not_selected selected no_instruction drain branch_resolving dispatch_stall)
    STALLS=${STALLS%,}
    if [[ -n ${MODEL[$m]:-} ]]; then
        stage "ncu: decode kernels of $m after 1,024 tokens"
        if timeout 300 ncu --clock-control none --profile-from-start off --csv --page details \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --metrics "dram__bytes_read.sum,gpu__time_duration.sum,$STALLS" \
            "$WORK/bin/gpu" --ncu "${MODEL[$m]}" 1024 1 >"$OUT/ncu-$m.csv" 2>"$OUT/ncu-$m.err" &&
            python3 "$ROOT/scripts/ncu-summary.py" "$OUT/ncu-$m.csv" | tee "$OUT/ncu-$m.txt"; then
            result PASS "ncu $m (ncu-$m.txt)"
        else
            tail -n 5 "$OUT/ncu-$m.err" "$OUT/ncu-$m.csv"
            result FAIL "ncu $m (ncu-$m.err)"
        fi
    fi
    if [[ ${GPU_NCU_KERNELS:-} != none ]]; then
        stage "ncu: the decode matmul kernels of gpu --bench-kernels"
        MLXR_BENCH_LAUNCHES=2 timeout 300 ncu --clock-control none --csv --page details \
            -k "${GPU_NCU_KERNELS:-regex:mmvq}" \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --metrics "dram__bytes_read.sum,gpu__time_duration.sum,$STALLS" \
            "$WORK/bin/gpu" --bench-kernels >"$OUT/ncu-kernels.csv" 2>"$OUT/ncu-kernels.err" &&
            python3 "$ROOT/scripts/ncu-summary.py" "$OUT/ncu-kernels.csv" | tee "$OUT/ncu-kernels.txt"
    fi
fi

# The prefill attention kernels of a 512-token prefill of GPU_NCU_PREFILL,
# timed by ncu, with each kernel.
if has ncu-prefill && command -v ncu >/dev/null; then
    m=${GPU_NCU_PREFILL:-llama8b-f16}
    for kernel in simt flash; do
        stage "ncu: prefill attention of $m, MLXR_CUDA_PREFILL=$kernel"
        MLXR_CUDA_PREFILL=$kernel timeout 200 ncu --clock-control none --csv --page details \
            --metrics gpu__time_duration.sum -k regex:prefill -c 64 \
            "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 512 -n 0 -r 1 \
            >"$OUT/ncu-prefill-$kernel.csv" 2>"$OUT/ncu-prefill-$kernel.err" &&
            python3 "$ROOT/scripts/ncu-summary.py" "$OUT/ncu-prefill-$kernel.csv" | tee "$OUT/ncu-prefill-$kernel.txt"
    done
fi

wait_llama() {
    if [[ -n ${LLAMA_PID:-} ]]; then
        stage "waiting for llama.cpp's build (until ${LLAMA_DEADLINE:=420}s)"
        while kill -0 "$LLAMA_PID" 2>/dev/null && (($(date +%s) - T0 < LLAMA_DEADLINE)); do sleep 5; done
        if kill -0 "$LLAMA_PID" 2>/dev/null; then
            kill "$LLAMA_PID"
            result FAIL "llama.cpp CUDA build: not done in ${LLAMA_DEADLINE}s"
        elif wait "$LLAMA_PID"; then result PASS "llama.cpp CUDA build"; else
            result FAIL "llama.cpp CUDA build (llama-build.log)"
            tail -20 "$OUT/llama-build.log"
        fi
        LLAMA_PID=""
    fi
}

if has bench; then
    wait_llama
    LLAMA_BENCH=$LLAMA/build/bin/llama-bench
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu --format=csv
    for m in ${GPU_BENCH:-llama8b-q4_k_m qwen1.5b-q4_k_m llama8b-f16}; do
        [[ -n ${MODEL[$m]:-} ]] || continue
        stage "bench $m"
        if [[ -x $LLAMA_BENCH ]]; then
            timeout 240 "$LLAMA_BENCH" -m "${MODEL[$m]}" -p "${GPU_BENCH_PROMPTS:-512}" -n 128 -fa 1 -ngl 99 -r 3 2>&1 |
                tee "$OUT/llama-bench-$m.log" | grep -E '^\|'
        fi
        if timeout 240 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p "${GPU_BENCH_PROMPTS:-512}" -n 128 -r 3 2>&1 | tee "$OUT/mlxr-bench-$m.log"; then
            result PASS "mlxr bench $m"
        else
            result FAIL "mlxr bench $m (mlxr-bench-$m.log)"
        fi
        # Prefill and decode under other settings (GPU_BENCH_ENV: assignments,
        # A=1,B=2 for both at once, e.g. MLXR_CUDA_F16_WEIGHTS=off).
        for setting in ${GPU_BENCH_ENV:-}; do
            echo "$setting"
            env ${setting//,/ } timeout 150 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 512 -n 128 -r 3 2>&1 |
                grep -E 'pp512|tg128|error'
        done
        # Prefill with each other attention kernel (the debug knob), pp512 only.
        for kernel in ${GPU_PREFILL:-}; do
            echo "MLXR_CUDA_PREFILL=$kernel"
            MLXR_CUDA_PREFILL=$kernel timeout 100 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 512 -n 0 -r 3 2>&1 |
                grep -E 'pp512|error'
        done
        # Decode with each other matmul shape (the debug knob), tg128 only.
        for shape in ${GPU_MATVEC:-}; do
            echo "MLXR_CUDA_MATVEC=$shape"
            MLXR_CUDA_MATVEC=$shape timeout 100 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 0 -n 128 -r 3 2>&1 |
                grep -E 'tg128|error'
        done
        # Decode from a deeper context (GPU_DEPTH, e.g. 1024), both engines.
        for depth in ${GPU_DEPTH:-}; do
            echo "depth $depth"
            if [[ -x $LLAMA_BENCH ]]; then
                timeout 120 "$LLAMA_BENCH" -m "${MODEL[$m]}" -p 0 -n 128 -d "$depth" -fa 1 -ngl 99 -r 3 2>&1 | grep -E '^\|'
            fi
            timeout 100 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 0 -n 128 -d "$depth" -r 3 2>&1 | grep -E 'tg128|error'
        done
        # Decode under other settings (GPU_DECODE_ENV: assignments of debug
        # knobs, e.g. MLXR_CUDA_ATTN_CHUNK=64), at depth 0 and each GPU_DEPTH.
        for setting in ${GPU_DECODE_ENV:-}; do
            for depth in 0 ${GPU_DEPTH:-}; do
                echo "$setting, depth $depth"
                env "$setting" timeout 100 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 0 -n 128 -d "$depth" -r 3 2>&1 |
                    grep -E 'tg128|error'
            done
        done
    done
fi

# mlxr's aggregate decode under each of GPU_BATCHED_ENV's settings.
batched_settings() {
    for setting in ${GPU_BATCHED_ENV:-}; do
        stage "batched $1: mlxr with $setting"
        # shellcheck disable=SC2086 # a setting's assignments, comma-separated
        env ${setting//,/ } timeout 300 "$MLXR" bench --device cuda -m "${MODEL[$1]}" \
            -p 128 -n 128 -r 1 --parallel "${GPU_NPL:=1,8,64,256}" 2>&1 |
            tee "$OUT/mlxr-batched-$1-${setting//[=,]/_}.log"
    done
}

if has batched; then
    for m in ${GPU_BATCHED:-llama8b-q4_k_m}; do
        [[ -n ${MODEL[$m]:-} ]] || continue
        # While llama.cpp compiles, unless the test stage filled that time.
        has test || batched_settings "$m"
        wait_llama
        stage "batched $m: ${GPU_NPL:=1,8,64,256} sequences of pp128 + tg128"
        if [[ -x $LLAMA/build/bin/llama-batched-bench ]]; then
            # One unified KV buffer holding every sequence, as mlxr's pool does.
            timeout 240 "$LLAMA/build/bin/llama-batched-bench" -m "${MODEL[$m]}" -c 65536 -b 2048 -ub 512 \
                -npp 128 -ntg 128 -npl "$GPU_NPL" -ngl 99 -fa on -kvu 2>&1 |
                tee "$OUT/llama-batched-$m.log" | grep -E '^\|'
        fi
        if timeout 300 "$MLXR" bench --device cuda -m "${MODEL[$m]}" -p 128 -n 128 -r 1 \
            --parallel "$GPU_NPL" 2>&1 | tee "$OUT/mlxr-batched-$m.log"; then
            result PASS "mlxr bench --parallel $m"
        else
            result FAIL "mlxr bench --parallel $m (mlxr-batched-$m.log)"
        fi
        ! has test || batched_settings "$m"
    done
fi

# Serving over HTTP: GPU_SERVING_STREAMS streaming clients (bench/serving.py,
# /v1/completions, 128 tokens each with ignore_eos, 2 requests a client)
# against mlxr serve --device cuda and llama-server -np N on the same file.
if has serving; then
    wait_llama
    n=${GPU_SERVING_STREAMS:-64}
    for m in ${GPU_SERVING:-llama8b-q4_k_m}; do
        [[ -n ${MODEL[$m]:-} ]] || continue
        port=18600
        serve_one() { # label log-name command (answering on $port)...
            local label=$1 name=$2
            shift 2
            "$@" >"$OUT/serving-$name-$m.log" 2>&1 &
            local pid=$! ok=0
            for _ in $(seq 1 600); do
                curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { ok=1; break; }
                kill -0 $pid 2>/dev/null || break
                sleep 0.2
            done
            if ((ok)) && timeout 240 python3 "$ROOT/bench/serving.py" --url "http://127.0.0.1:$port" \
                --model random --endpoint completions --label "$label" -c "$n" --requests-per-client 2 \
                --max-tokens 128 --json-out "$WORK/serving-$name-$m.json" 2>&1 | tee -a "$OUT/serving-$m.log"; then
                result PASS "serving $m: $label"
            else
                result FAIL "serving $m: $label (serving-$name-$m.log)"
            fi
            kill $pid 2>/dev/null
            wait $pid 2>/dev/null
        }
        stage "serving $m: $n streams over HTTP"
        rm -f "$WORK"/serving-*-"$m".json
        if [[ -x $LLAMA/build/bin/llama-server ]]; then
            serve_one "llama-server -np $n" llama "$LLAMA/build/bin/llama-server" -m "${MODEL[$m]}" \
                -np "$n" -c $((n * 512)) -ngl 99 -fa on --host 127.0.0.1 --port $port
        fi
        serve_one "mlxr serve" mlxr "$MLXR" serve --device cuda --home "$WORK/home-serving" \
            -m "${MODEL[$m]}" --name random --max-num-seqs "$n" --host 127.0.0.1:$port
        python3 - "$ROOT/bench" "$WORK" "$m" <<'PY' | tee -a "$OUT/serving-$m.log"
import glob, json, os, sys
sys.path.insert(0, sys.argv[1])
from serving import summarize
runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(sys.argv[2], f"serving-*-{sys.argv[3]}.json")))]
means = summarize(runs)
ours = [v for k, v in means.items() if k == "mlxr serve"]
ref = [v for k, v in means.items() if k.startswith("llama-server")]
if ours and ref:
    print(f"\noutput tok/s ratio, mlxr / llama-server: {ours[0] / ref[0]:.2f}x")
PY
    done
fi

if has folders && [[ -n ${MODEL[${GPU_FOLDERS:=qwen1.5b-f16}]:-} ]]; then
    stage "folders from $GPU_FOLDERS: F16, BF16, FP8, NF4"
    F=$WORK/folders
    rm -rf "$F" && mkdir -p "$F"
    "$MLXR" convert "${MODEL[$GPU_FOLDERS]}" "$F/f16" --outtype f16 >/dev/null &&
        "$MLXR" convert "${MODEL[$GPU_FOLDERS]}" "$F/bf16" --outtype bf16 >/dev/null ||
        result FAIL "mlxr convert $GPU_FOLDERS"
    python3 "$ROOT/bench/fp8_nf4_folders.py" "$F/f16" "$F/fp8" "$F/nf4" ||
        result FAIL "bench/fp8_nf4_folders.py"
    du -sh "$F"/* "${MODEL[$GPU_FOLDERS]}" ${MODEL[qwen1.5b-q8_0]:+"${MODEL[qwen1.5b-q8_0]}"}
    for m in "$F/f16" "$F/bf16" "$F/fp8" "$F/nf4" "${MODEL[$GPU_FOLDERS]}" ${MODEL[qwen1.5b-q8_0]:+"${MODEL[qwen1.5b-q8_0]}"}; do
        [[ -e $m ]] || continue
        stage "bench $(basename "$m")"
        if timeout 150 "$MLXR" bench --device cuda -m "$m" -p 512 -n 128 -r 3 2>&1 |
            tee "$OUT/mlxr-bench-folder-$(basename "$m").log"; then
            result PASS "mlxr bench $(basename "$m")"
        else
            result FAIL "mlxr bench $(basename "$m") (mlxr-bench-folder-$(basename "$m").log)"
        fi
    done
fi

# After the benchmarks: not while llama.cpp compiles (host load skews the
# per-op times).
if has profile && [[ -x $WORK/bin/gpu ]]; then
    if [[ ${GPU_BENCH_KERNELS:-1} != 0 ]]; then
        stage "decode matmul kernels (gpu --bench-kernels)"
        timeout 300 "$WORK/bin/gpu" --bench-kernels 2>&1 | tee "$OUT/bench-kernels.log"
    fi
    for m in ${GPU_PROFILE:-${GPU_BENCH:-llama8b-q4_k_m qwen1.5b-q4_k_m llama8b-f16}}; do
        [[ -n ${MODEL[$m]:-} ]] || continue
        stage "profile $m (gpu --profile)"
        # As tg128 runs (a one-token prompt), then at a 1,024-token context.
        if timeout 150 "$WORK/bin/gpu" --profile "${MODEL[$m]}" 1 64 2>&1 | tee "$OUT/profile-$m.log" &&
            timeout 150 "$WORK/bin/gpu" --profile "${MODEL[$m]}" 1024 32 2>&1 | tee -a "$OUT/profile-$m.log"; then
            result PASS "profile $m (profile-$m.log)"
        else
            result FAIL "profile $m (profile-$m.log)"
        fi
        # Many sequences decoding together (GPU_PROFILE_SEQS, e.g. "16 64"),
        # each after a 128-token prompt.
        for seqs in ${GPU_PROFILE_SEQS:-}; do
            stage "profile $m, $seqs sequences (gpu --profile)"
            timeout 150 "$WORK/bin/gpu" --profile "${MODEL[$m]}" 128 16 "$seqs" 2>&1 |
                tee -a "$OUT/profile-$m.log" || result FAIL "profile $m, $seqs sequences (profile-$m.log)"
        done
    done
fi

stage "summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
! grep -q '^FAIL' "$OUT/summary.txt"
