#!/usr/bin/env python3
"""gRPC against SSE streaming (issue 22), against a running `mlxr serve`:
C concurrent streams of N tokens each, the same raw prompt, greedy, through
`mlxr.v1.Inference/Generate` (grpc.aio) and through `/v1/completions` with
`stream: true` (httpx), the two alternating round by round so that both see
the same machine. Both give the same tokens (greedy, same prompt).

Reported per protocol: output tok/s (all tokens / wall time of the round),
and the gaps between a stream's consecutive messages as the client sees
them (p50, p99, over all streams and rounds), and the time to the first
message.

  bench/grpc_vs_sse.py --host 127.0.0.1:18391 --model smollm2 -c 16 -n 128 -r 3
"""

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Count from 1 to 1000, one number per line:\n1\n2\n3\n"


def generated_stubs():
    out = tempfile.mkdtemp(prefix="mlxr-grpc-")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto/mlxr/v1'}",
                    f"--python_out={out}", f"--grpc_python_out={out}", "inference.proto"], check=True)
    sys.path.insert(0, out)
    import inference_pb2
    import inference_pb2_grpc
    return inference_pb2, inference_pb2_grpc


async def grpc_stream(stub, pb, args, i):
    req = pb.GenerateRequest(model=args.model, prompt=PROMPT + f"{i % 7 + 4}\n", raw=True,
                             options=pb.Options(temperature=0, num_predict=args.n))
    times, tokens = [], 0
    async for m in stub.Generate(req):
        if m.WhichOneof("event") == "token":
            times.append(time.perf_counter())
            tokens += 1
    return tokens, times


async def sse_stream(client, args, i):
    body = {"model": args.model, "prompt": PROMPT + f"{i % 7 + 4}\n", "max_tokens": args.n,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    times, tokens = [], 0
    async with client.stream("POST", "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices"):
                times.append(time.perf_counter())
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return tokens, times


async def one_round(kind, args, pb, stubs, client):
    start = time.perf_counter()
    if kind == "grpc":
        jobs = [grpc_stream(stubs[i % len(stubs)], pb, args, i) for i in range(args.c)]
    else:
        jobs = [sse_stream(client, args, i) for i in range(args.c)]
    results = await asyncio.gather(*jobs)
    wall = time.perf_counter() - start
    tokens = sum(t for t, _ in results)
    gaps = [b - a for _, ts in results for a, b in zip(ts, ts[1:])]
    first = [ts[0] - start for _, ts in results if ts]
    return tokens / wall, gaps, first


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1e3


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("-c", type=int, default=16)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--channels", type=int, default=1,
                    help="gRPC channels (HTTP/2 connections) the streams share; SSE has one connection a stream")
    args = ap.parse_args()
    pb, rpc = generated_stubs()
    rates = {"grpc": [], "sse": []}
    gaps = {"grpc": [], "sse": []}
    firsts = {"grpc": [], "sse": []}
    limits = httpx.Limits(max_connections=args.c + 4)
    # Distinct channel arguments keep grpcio from sharing one connection.
    channels = [grpc.aio.insecure_channel(args.host, options=[("mlxr.bench.channel", i)])
                for i in range(args.channels)]
    stubs = [rpc.InferenceStub(ch) for ch in channels]
    async with httpx.AsyncClient(base_url=f"http://{args.host}", timeout=600, limits=limits) as client:
        await one_round("grpc", args, pb, stubs, client)  # warm-up: load, caches
        await one_round("sse", args, pb, stubs, client)
        for r in range(args.rounds):
            for kind in (("grpc", "sse") if r % 2 == 0 else ("sse", "grpc")):
                rate, g, f = await one_round(kind, args, pb, stubs, client)
                rates[kind].append(rate)
                gaps[kind].extend(g)
                firsts[kind].extend(f)
    for ch in channels:
        await ch.close()
    for kind in ("sse", "grpc"):
        rs = rates[kind]
        sd = statistics.stdev(rs) if len(rs) > 1 else 0.0
        name = kind if kind == "sse" else f"grpc ({args.channels} channel{'s' if args.channels > 1 else ''})"
        print(f"| {args.model} | {name} | {statistics.mean(rs):.1f} ± {sd:.1f} | "
              f"{pct(gaps[kind], 50):.1f} | {pct(gaps[kind], 99):.1f} | {pct(firsts[kind], 50):.0f} |")
    ratio = statistics.mean(rates["grpc"]) / statistics.mean(rates["sse"])
    print(f"| {args.model} | grpc / sse | {ratio:.2f}x | | | |")


if __name__ == "__main__":
    asyncio.run(main())
