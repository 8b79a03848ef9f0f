"""Load test: 64 concurrent clients against one real `mlxr serve` for a
fixed time, mixing streaming and non-streaming generation on both APIs,
embeddings, clients that hang up mid-stream and malformed requests.

Checks: no 5xx; every valid request gets 200; every stream read to its end
finishes with `data: [DONE]` (SSE) or `"done": true` (NDJSON) or a clean
error object; every malformed request gets a 4xx; afterwards the engine has
nothing running or waiting and every KV block is free (`/metrics`).

Leaks: the run has two phases, each ended by letting the clients finish and
the engine drain. Between the drained state after the first (the warm-up)
and after the second, the heap in use (`mlxr:heap_in_use_bytes`, glibc's
count of bytes malloc handed out and did not get back) must grow by less
than 1%: a leak of a few hundred bytes a request shows there. RSS must grow
by less than 10%: it also holds freed memory glibc keeps for reuse, so it
steps up with each new peak of concurrent work (+3-6% over a 2-minute run
with two malloc arenas), but it climbed without end with many (+9-55%).

MLXR_LOAD_SECONDS (default 120) is the loaded time, MLXR_LOAD_CLIENTS
(default 64) the number of clients, MLXR_LOAD_WARMUP (default half the
time, at most 60 s) the first phase.
MLXR_LOAD_THREADS is the server's `-t` (default: its own).
MLXR_LOAD_REPORT=path also writes the summary there as JSON (bench/load.sh).
"""

import asyncio
import collections
import json
import os
import random
import time

import httpx
import pytest

from conftest import EMBED_MODEL, MODEL, Server

SECONDS = float(os.environ.get("MLXR_LOAD_SECONDS", "120"))
CLIENTS = int(os.environ.get("MLXR_LOAD_CLIENTS", "64"))
WARMUP = float(os.environ.get("MLXR_LOAD_WARMUP", str(min(60.0, SECONDS / 2))))
RSS_GROWTH_LIMIT = 0.10
HEAP_GROWTH_LIMIT = 0.01
RSS_SAMPLE_S = 10
# How long the engine may take to drain after the last client stops.
DRAIN_DEADLINE_S = 120

JSON_HEADERS = {"Content-Type": "application/json"}

PROMPTS = [
    "Why is the sky blue?",
    "Write a haiku about the sea.",
    "List three colours.",
    "What is 12 times 7?",
    "Tell me a short story about a robot who learns to paint. " * 12,
    "Translate 'good morning' into French.",
]


def pick_prompt(rng: random.Random) -> str:
    # A random suffix keeps most prompts out of the prefix cache.
    return f"{rng.choice(PROMPTS)} (#{rng.randrange(10**6)})"


# -- valid requests: (kind, method path, body, framing) ---------------------

def openai_chat_stream(rng):
    return "/v1/chat/completions", {
        "model": MODEL, "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": pick_prompt(rng)}],
        "max_tokens": rng.randint(1, 32), "temperature": 0.8, "seed": rng.randrange(1000)}, "sse"


def openai_completion_stream(rng):
    return "/v1/completions", {
        "model": MODEL, "prompt": pick_prompt(rng), "stream": True,
        "stream_options": {"include_usage": True}, "max_tokens": rng.randint(1, 32)}, "sse"


def openai_completion(rng):
    return "/v1/completions", {
        "model": MODEL, "prompt": pick_prompt(rng), "max_tokens": rng.randint(1, 24),
        "temperature": 0}, "json"


def ollama_chat(rng):
    return "/api/chat", {
        "model": MODEL, "messages": [{"role": "user", "content": pick_prompt(rng)}],
        "options": {"num_predict": rng.randint(1, 32)}}, "ndjson"


def ollama_generate(rng):
    return "/api/generate", {
        "model": MODEL, "prompt": pick_prompt(rng),
        "options": {"num_predict": rng.randint(1, 32), "temperature": 0.5}}, "ndjson"


def openai_embeddings(rng):
    return "/v1/embeddings", {
        "model": EMBED_MODEL, "input": [pick_prompt(rng) for _ in range(rng.randint(1, 4))]}, "json"


def ollama_embed(rng):
    return "/api/embed", {"model": EMBED_MODEL, "input": pick_prompt(rng)}, "json"


VALID = [openai_chat_stream, openai_completion_stream, openai_completion, ollama_chat,
         ollama_generate, openai_embeddings, ollama_embed]
STREAMING = [openai_chat_stream, openai_completion_stream, ollama_chat, ollama_generate]

# -- malformed requests: each must get a 4xx --------------------------------

MALFORMED = [
    ("bad json", "/v1/chat/completions", b'{"model": "smollm2", "messages": ['),
    ("bad json", "/api/generate", b'{"model": "smollm2", "prompt": "hi",,}'),
    ("bad json", "/api/embed", b"\xff\xfe not json"),
    ("unknown model", "/v1/chat/completions",
     {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}),
    ("unknown model", "/api/generate", {"model": "no-such-model", "prompt": "hi"}),
    ("unknown model", "/api/embed", {"model": "no-such-model", "input": "hi"}),
    ("wrong type", "/v1/chat/completions", {"model": MODEL, "messages": "hi"}),
    ("wrong type", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": "ten"}),
    ("wrong type", "/api/chat", {"model": MODEL, "messages": [{"role": "user", "content": 5}]}),
    ("wrong type", "/v1/embeddings", {"model": EMBED_MODEL, "input": {"text": "hi"}}),
    ("oversized value", "/v1/chat/completions",
     {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**30}),
    ("oversized value", "/v1/completions", b'{"model": "smollm2", "prompt": "hi", "temperature": 1e400}'),
    ("oversized value", "/api/generate",
     {"model": MODEL, "prompt": "hi", "options": {"num_predict": 2**64}}),
    ("oversized value", "/v1/chat/completions",
     {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 10**9,
      "logprobs": True}),
    ("oversized value", "/v1/completions", {"model": MODEL, "prompt": "hi", "logprobs": 1000000}),
    ("oversized value", "/api/generate", {"model": MODEL, "prompt": "hi", "keep_alive": 1e300}),
]


class Stats:
    def __init__(self):
        self.requests = collections.Counter()
        self.statuses = collections.defaultdict(collections.Counter)
        self.endings = collections.Counter()
        self.tokens = 0
        self.failures: list[str] = []

    def fail(self, kind: str, why: str):
        if len(self.failures) < 50:
            self.failures.append(f"{kind}: {why}")
        else:
            self.failures[-1] = f"... and more ({kind}: {why})"


def parse_sse(kind: str, lines: list[str], stats: Stats):
    events = [line[len("data: "):] for line in lines if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        stats.fail(kind, f"SSE stream did not end with [DONE]: {events[-3:]}")
        return
    payloads = [json.loads(e) for e in events[:-1]]
    if any("error" in p for p in payloads):
        error = next(p["error"] for p in payloads if "error" in p)
        if not isinstance(error, dict) or not error.get("message"):
            stats.fail(kind, f"unclean error object in stream: {error!r}")
        stats.endings["sse error"] += 1
        return
    usage = [p["usage"] for p in payloads if p.get("usage")]
    if not usage:
        stats.fail(kind, "stream_options.include_usage sent no usage chunk")
        return
    stats.tokens += usage[-1]["completion_tokens"]
    stats.endings["sse [DONE]"] += 1


def parse_ndjson(kind: str, lines: list[str], stats: Stats):
    objects = [json.loads(line) for line in lines if line.strip()]
    last = objects[-1] if objects else {}
    if "error" in last:
        if not isinstance(last["error"], str) or not last["error"]:
            stats.fail(kind, f"unclean error object in stream: {last!r}")
        stats.endings["ndjson error"] += 1
    elif last.get("done") is True:
        stats.tokens += last.get("eval_count", 0)
        stats.endings["ndjson done"] += 1
    else:
        stats.fail(kind, f"NDJSON stream did not end with done: true: {objects[-2:]}")


async def valid_request(client: httpx.AsyncClient, rng: random.Random, stats: Stats, abort: bool):
    make = rng.choice(STREAMING if abort else VALID)
    path, body, framing = make(rng)
    kind = ("abort " if abort else "") + make.__name__
    stats.requests[kind] += 1
    async with client.stream("POST", path, json=body) as r:
        stats.statuses[kind][r.status_code] += 1
        if r.status_code != 200:
            stats.fail(kind, f"{r.status_code}: {(await r.aread())[:300]!r}")
            return
        if abort:
            # Hang up after a few chunks; leaving the block unread closes the connection.
            chunks = 0
            async for _ in r.aiter_lines():
                chunks += 1
                if chunks >= rng.randint(1, 3):
                    break
            stats.endings["aborted by client"] += 1
            return
        if framing == "json":
            answer = json.loads(await r.aread())
            if "usage" in answer and "completion_tokens" in answer["usage"]:
                stats.tokens += answer["usage"]["completion_tokens"]
            stats.endings["json"] += 1
            return
        lines = [line async for line in r.aiter_lines()]
    (parse_sse if framing == "sse" else parse_ndjson)(kind, lines, stats)


async def malformed_request(client: httpx.AsyncClient, rng: random.Random, stats: Stats):
    what, path, body = rng.choice(MALFORMED)
    kind = f"malformed ({what})"
    stats.requests[kind] += 1
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = await client.post(path, content=content, headers=JSON_HEADERS)
    stats.statuses[kind][r.status_code] += 1
    if not 400 <= r.status_code < 500:
        stats.fail(kind, f"{path} {content[:80]!r} got {r.status_code}: {r.text[:200]}")


async def client_loop(client: httpx.AsyncClient, seed: int, stop_at: float, stats: Stats):
    rng = random.Random(seed)
    while time.monotonic() < stop_at:
        roll = rng.random()
        try:
            if roll < 0.10:
                await malformed_request(client, rng, stats)
            else:
                await valid_request(client, rng, stats, abort=roll < 0.20)
        except (httpx.HTTPError, json.JSONDecodeError) as e:
            stats.fail("transport", f"{type(e).__name__}: {e}")


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def engine_gauges(url: str) -> dict[str, float]:
    """The sum over models of each `mlxr:` gauge the drain check reads."""
    wanted = ("mlxr:num_requests_running", "mlxr:num_requests_waiting", "mlxr:kv_cache_usage_perc")
    text = httpx.get(url + "/metrics", timeout=30).text
    gauges = {name: 0.0 for name in wanted}
    seen = set()
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in gauges:
            gauges[name] += float(line.rsplit(" ", 1)[1])
            seen.add(name)
    assert seen == set(wanted), f"/metrics lacks {set(wanted) - seen}:\n{text}"
    return gauges


def wait_drained(url: str) -> dict[str, float]:
    deadline = time.monotonic() + DRAIN_DEADLINE_S
    while True:
        gauges = engine_gauges(url)
        if not any(gauges.values()) or time.monotonic() > deadline:
            return gauges
        time.sleep(0.2)


async def sample_rss(pid: int, start: float, out: list[tuple[int, int]]):
    """RSS every RSS_SAMPLE_S seconds (to tell a step from a steady climb)."""
    while True:
        out.append((round(time.monotonic() - start), rss_kib(pid)))
        await asyncio.sleep(RSS_SAMPLE_S)


def load_models(url: str):
    """Loads both models before the clock starts (they load on first use)."""
    for path, body in [("/api/generate", {"model": MODEL, "prompt": "Hi", "stream": False,
                                          "options": {"num_predict": 1}}),
                       ("/api/embed", {"model": EMBED_MODEL, "input": "Hi"})]:
        r = httpx.post(url + path, json=body, timeout=300)
        assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"


def memory(url: str) -> dict[str, int]:
    """The daemon's RSS and heap in use, from /metrics."""
    text = httpx.get(url + "/metrics", timeout=30).text
    values = {line.split(" ")[0]: int(float(line.rsplit(" ", 1)[1]))
              for line in text.splitlines() if line and not line.startswith("#")}
    names = {"rss": "process_resident_memory_bytes", "heap": "mlxr:heap_in_use_bytes"}
    assert all(n in values for n in names.values()), f"/metrics lacks {names}:\n{text}"
    return {k: values[n] for k, n in names.items()}


async def load_phase(client: httpx.AsyncClient, url: str, seconds: float, seed: int,
                     stats: Stats) -> tuple[dict[str, float], dict[str, int]]:
    """CLIENTS clients for `seconds`; then waits for the engine to drain and
    reads the gauges and the memory."""
    stop_at = time.monotonic() + seconds
    await asyncio.gather(*(client_loop(client, seed + i, stop_at, stats) for i in range(CLIENTS)))
    gauges = await asyncio.to_thread(wait_drained, url)
    return gauges, await asyncio.to_thread(memory, url)


async def run_load(server: Server) -> dict:
    load_models(server.url)
    stats = Stats()
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    timeout = httpx.Timeout(300.0, connect=30.0)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=timeout,
                                 headers=JSON_HEADERS) as client:
        start = time.monotonic()
        samples: list[tuple[int, int]] = []
        sampler = asyncio.create_task(sample_rss(server.proc.pid, start, samples))
        _, warm = await load_phase(client, server.url, WARMUP, 0, stats)
        gauges, end = await load_phase(client, server.url, SECONDS - WARMUP, CLIENTS, stats)
        sampler.cancel()
    elapsed = time.monotonic() - start
    return {
        "seconds": round(elapsed, 1), "clients": CLIENTS, "warmup_s": WARMUP,
        "server_threads": os.environ.get("MLXR_LOAD_THREADS") or "default",
        "requests": dict(stats.requests),
        "statuses": {k: dict(v) for k, v in stats.statuses.items()},
        "endings": dict(stats.endings),
        "generated_tokens": stats.tokens,
        "tokens_per_s": round(stats.tokens / elapsed, 1),
        "requests_per_s": round(sum(stats.requests.values()) / elapsed, 2),
        "memory_after_warmup": warm,
        "memory_end": end,
        "rss_growth": round(end["rss"] / warm["rss"] - 1, 4),
        "heap_growth": round(end["heap"] / warm["heap"] - 1, 4),
        "rss_samples_kib": samples,
        "gauges_after": gauges,
        "failures": stats.failures,
    }


def print_summary(s: dict):
    lines = [f"\n== load: {s['clients']} clients, {s['seconds']} s "
             f"({s['requests_per_s']} req/s, {s['generated_tokens']} tokens, {s['tokens_per_s']} tokens/s)"]
    for kind in sorted(s["requests"]):
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(s["statuses"].get(kind, {}).items()))
        lines.append(f"  {kind:40} {s['requests'][kind]:6}   {statuses}")
    lines.append(f"  endings: {s['endings']}")
    warm, end = s["memory_after_warmup"], s["memory_end"]
    lines.append(f"  drained after warm-up / at the end, MiB: RSS {warm['rss'] >> 20} / {end['rss'] >> 20} "
                 f"({s['rss_growth']:+.2%}), heap in use {warm['heap'] >> 20} / {end['heap'] >> 20} "
                 f"({s['heap_growth']:+.3%})")
    lines.append("  RSS MiB every %d s: %s" % (RSS_SAMPLE_S, " ".join(str(kib // 1024) for _, kib in s["rss_samples_kib"])))
    lines.append(f"  gauges after the run: {s['gauges_after']}")
    lines.extend(f"  FAILURE {f}" for f in s["failures"])
    print("\n".join(lines))


@pytest.mark.load
def test_load(tmp_path, capsys):
    threads = ["-t", os.environ["MLXR_LOAD_THREADS"]] if os.environ.get("MLXR_LOAD_THREADS") else []
    server = Server(tmp_path, *threads)
    try:
        summary = asyncio.run(run_load(server))
        assert server.proc.poll() is None, "mlxr serve died under load:\n" + server.read_log()[-3000:]
    finally:
        server.stop()
    with capsys.disabled():
        print_summary(summary)
    if path := os.environ.get("MLXR_LOAD_REPORT"):
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)

    server_errors = {k: v for k, v in summary["statuses"].items() if any(c >= 500 for c in v)}
    assert not server_errors, f"5xx answers: {server_errors}"
    assert not summary["failures"], "\n".join(summary["failures"])
    for kind in ("malformed", "abort", "openai_chat_stream", "ollama_generate", "embed"):
        assert any(kind in k for k in summary["requests"]), f"no {kind} request was made"
    assert summary["gauges_after"] == {
        "mlxr:num_requests_running": 0, "mlxr:num_requests_waiting": 0,
        "mlxr:kv_cache_usage_perc": 0}, "the engine did not drain"
    assert summary["heap_growth"] < HEAP_GROWTH_LIMIT, (
        f"the heap in use grew {summary['heap_growth']:.3%} after warm-up (limit {HEAP_GROWTH_LIMIT:.0%}): "
        f"{summary['memory_after_warmup']} -> {summary['memory_end']}")
    assert summary["rss_growth"] < RSS_GROWTH_LIMIT, (
        f"RSS grew {summary['rss_growth']:.2%} after warm-up (limit {RSS_GROWTH_LIMIT:.0%})")
