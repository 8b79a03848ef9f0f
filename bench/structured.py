#!/usr/bin/env python3
"""Structured output benchmark (issue 20), against a running `mlxr serve`:

1. Decode throughput with a JSON-schema constraint vs without, at each
   concurrency: every request asks for max_tokens tokens and gets them (the
   unconstrained ones with ignore_eos, the constrained ones under a schema
   that cannot close before: an array of at least 200 strings of at most 24
   characters, whose masks are the slow kind, llguidance's `maxLength`).
   Reported: output tok/s (all completion tokens / wall time) and the
   server's own per-request decode tok/s; the constrained/free ratio.
2. Time to the first token of a 50-property schema (max_tokens 1) against
   the same request unconstrained: the first constrained request, 3 s after
   the model loaded (the server builds the vocabulary's token trie in the
   background at load), a new schema each time (compiled), the same schema
   again (cached).

Standard library only.

  bench/structured.py --url http://127.0.0.1:18181 --model qwen -c 1 16 -n 128
"""

import argparse
import json
import statistics
import threading
import time
import urllib.request

TOPICS = ["fruits", "cities", "animals", "colors", "rivers", "tools", "games", "trees"]


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def long_list_schema():
    return {"type": "object", "properties": {"items": {
        "type": "array", "minItems": 200, "items": {"type": "string", "maxLength": 24}}},
        "required": ["items"], "additionalProperties": False}


def request(args, i, constrained):
    b = {"model": args.model, "max_tokens": args.max_tokens, "temperature": 0,
         "messages": [{"role": "user", "content": f"List as many {TOPICS[i % len(TOPICS)]} as you can, as JSON (list {i})."}]}
    if constrained:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "list", "schema": long_list_schema()}}
    else:
        b["ignore_eos"] = True
    return b


def throughput(args, concurrency, constrained):
    results, lock = [], threading.Lock()

    def client(c):
        for r in range(args.requests_per_client):
            out = post(args.url, request(args, c * 1000 + r, constrained))
            with lock:
                results.append(out)

    post(args.url, request(args, 999999, constrained))  # warm-up, untimed
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    short = [r for r in results if r["usage"]["completion_tokens"] != args.max_tokens]
    per_request = statistics.median(r["timings"]["predicted_per_second"] for r in results)
    return tokens / wall, per_request, len(short)


def wide_schema(tag):
    props = {f"{tag}_field_{i}": {"type": ["string", "integer", "boolean"]} for i in range(50)}
    return {"type": "object", "properties": props, "required": list(props)[:10]}


def ttft_ms(args, schema):
    b = {"model": args.model, "max_tokens": 1, "temperature": 0,
         "messages": [{"role": "user", "content": "Fill in the record as JSON."}]}
    if schema is not None:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "record", "schema": schema}}
    t0 = time.perf_counter()
    post(args.url, b)
    return (time.perf_counter() - t0) * 1000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("-c", "--concurrency", type=int, nargs="+", default=[1, 16])
    p.add_argument("-n", "--max-tokens", type=int, default=128)
    p.add_argument("-r", "--requests-per-client", type=int, default=2)
    args = p.parse_args()

    # First-mask latency first: the first constrained request of this server.
    ttft_ms(args, None)  # loads the model
    time.sleep(3)
    cold = ttft_ms(args, wide_schema("cold"))
    free = statistics.median(ttft_ms(args, None) for _ in range(5))
    new = statistics.median(ttft_ms(args, wide_schema(f"s{i}")) for i in range(5))
    cached = statistics.median(ttft_ms(args, wide_schema("s0")) for _ in range(5))
    print(f"| {args.model} | first token, 50-property schema (ms) | unconstrained {free:.0f} | "
          f"first constrained request {cold:.0f} | new schema {new:.0f} (+{new - free:.0f}) | "
          f"same schema {cached:.0f} (+{cached - free:.0f}) |")
    for c in args.concurrency:
        f_tps, f_req, _ = throughput(args, c, False)
        s_tps, s_req, short = throughput(args, c, True)
        note = f" ({short} constrained replies shorter than {args.max_tokens})" if short else ""
        print(f"| {args.model} | {c} streams | free {f_tps:.1f} tok/s ({f_req:.1f}/stream) | "
              f"schema {s_tps:.1f} tok/s ({s_req:.1f}/stream) | **{s_tps / f_tps:.3f}×**{note} |")


if __name__ == "__main__":
    main()
