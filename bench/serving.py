#!/usr/bin/env python3
"""Serving benchmark (issue 7): N concurrent streaming clients against any
OpenAI-compatible server (`/v1/chat/completions` or `/v1/completions`).

Each of --concurrency clients sends --requests-per-client requests one after
the other (distinct short prompts, `max_tokens` fixed, `ignore_eos: true` so
every reply has exactly max_tokens tokens on servers that honour it: mlxr and
llama-server do). One untimed warm-up request goes first. Reported:

- output tok/s: completion tokens of all requests / wall time from the first
  request sent to the last reply finished (tokens from the final chunk's
  `usage` when the server sends it, else one per content chunk);
- TTFT: request sent -> first chunk with content (p50/p90/p99 over requests);
- ITL: gaps between consecutive content chunks of one reply (p50/p90/p99
  over all gaps; a chunk may carry more than one token on some servers);
- TPOT: (last chunk - first chunk) / (tokens - 1) per request (p50).

  bench/serving.py --url http://127.0.0.1:11435 --model smollm2 -c 16
  bench/serving.py --url http://127.0.0.1:8080 --label llama-server --json-out run.json
  bench/serving.py --summarize a.json b.json      # pooled table of saved runs

Needs httpx (bench/serving.sh installs it into ~/.cache/mlxr/bench-venv).
"""

import argparse
import asyncio
import json
import statistics
import sys
import time

TOPICS = [
    "the sea", "a lighthouse", "autumn leaves", "a robot", "the moon", "a library",
    "mountains", "a city at night", "a cat", "rain", "a train journey", "the desert",
    "a garden", "winter", "a violin", "the stars", "a river", "an old map",
    "a bakery", "thunder", "a forest", "a clock", "the wind", "a bridge",
]


def percentile(xs, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def body(args, i):
    text = f"Write a long story about {TOPICS[i % len(TOPICS)]} (story {i})."
    b = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if not args.no_ignore_eos:
        b["ignore_eos"] = True
    if args.endpoint == "chat":
        b["messages"] = [{"role": "user", "content": text}]
    else:
        b["prompt"] = text
    return b


async def one_request(client, args, i):
    path = "/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions"
    sent = time.perf_counter()
    times, usage = [], None
    async with client.stream("POST", args.url + path, json=body(args, i)) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                if text:
                    times.append(time.perf_counter())
    if not times:
        raise RuntimeError(f"request {i}: no content")
    tokens = (usage or {}).get("completion_tokens") or len(times)
    return {
        "start": sent,
        "end": times[-1],
        "tokens": tokens,
        "ttft_ms": (times[0] - sent) * 1000,
        "itl_ms": [(b - a) * 1000 for a, b in zip(times, times[1:])],
        "tpot_ms": (times[-1] - times[0]) * 1000 / (tokens - 1) if tokens > 1 else None,
    }


async def run(args):
    import httpx

    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=args.concurrency + 4)
    async with httpx.AsyncClient(timeout=None, limits=limits, headers=headers) as client:
        await one_request(client, args, 10_000)  # warm-up, untimed

        async def worker(c):
            out = []
            for k in range(args.requests_per_client):
                out.append(await one_request(client, args, c * args.requests_per_client + k))
            return out

        t0 = time.perf_counter()
        per_client = await asyncio.gather(*(worker(c) for c in range(args.concurrency)))
        wall = time.perf_counter() - t0
    reqs = [r for rs in per_client for r in rs]
    return {
        "label": args.label,
        "url": args.url,
        "endpoint": args.endpoint,
        "concurrency": args.concurrency,
        "requests": len(reqs),
        "max_tokens": args.max_tokens,
        "wall_s": wall,
        "output_tokens": sum(r["tokens"] for r in reqs),
        "output_tok_s": sum(r["tokens"] for r in reqs) / wall,
        "ttft_ms": [r["ttft_ms"] for r in reqs],
        "itl_ms": [x for r in reqs for x in r["itl_ms"]],
        "tpot_ms": [r["tpot_ms"] for r in reqs if r["tpot_ms"] is not None],
    }


def summarize(runs):
    """One row per label: tok/s mean ± sd over runs, latencies pooled."""
    print("| server | streams | runs | requests | output tokens | output tok/s | "
          "TTFT p50 / p90 / p99 (ms) | ITL p50 / p90 / p99 (ms) | TPOT p50 (ms) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    labels = []
    for r in runs:
        if r["label"] not in labels:
            labels.append(r["label"])
    means = {}
    for label in labels:
        rs = [r for r in runs if r["label"] == label]
        tps = [r["output_tok_s"] for r in rs]
        means[label] = statistics.mean(tps)
        sd = statistics.stdev(tps) if len(tps) > 1 else 0.0
        ttft = [x for r in rs for x in r["ttft_ms"]]
        itl = [x for r in rs for x in r["itl_ms"]]
        tpot = [x for r in rs for x in r["tpot_ms"]]
        p = lambda xs: " / ".join(f"{percentile(xs, q):.0f}" for q in (50, 90, 99))
        print(f"| {label} | {rs[0]['concurrency']} | {len(rs)} | {sum(r['requests'] for r in rs)} | "
              f"{sum(r['output_tokens'] for r in rs)} | {means[label]:.1f} ± {sd:.1f} | "
              f"{p(ttft)} | {p(itl)} | {percentile(tpot, 50):.1f} |")
    return means


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:11435", help="server base URL (without /v1)")
    ap.add_argument("--model", default="default", help="the request's model field")
    ap.add_argument("--endpoint", choices=["chat", "completions"], default="chat")
    ap.add_argument("-c", "--concurrency", type=int, default=16)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos")
    ap.add_argument("--api-key")
    ap.add_argument("--label", default=None, help="name in the table (default: the URL)")
    ap.add_argument("--json-out", help="also save this run (with every sample) here")
    ap.add_argument("--summarize", nargs="+", metavar="RUN.json", help="print the table of saved runs")
    args = ap.parse_args()
    if args.summarize:
        summarize([json.load(open(f)) for f in args.summarize])
        return
    args.label = args.label or args.url
    result = asyncio.run(run(args))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f)
    summarize([result])


if __name__ == "__main__":
    sys.exit(main())
