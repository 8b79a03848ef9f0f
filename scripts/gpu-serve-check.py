#!/usr/bin/env python3
"""Checks a running `mlxr serve --device cuda` over HTTP (stdlib only: the GPU
machine has no openai package). Used by scripts/gpu-tests.sh.

  gpu-serve-check.py BASE_URL MODEL

1. /api/ps-free start: /v1/models lists MODEL.
2. A greedy chat completion, then the same streamed: same text.
3. /api/ps reports the model on a CUDA device.
4. A stream dropped after a few chunks; the next request still answers.
5. Eight requests at once all answer.
"""

import json
import sys
import threading
import time
import urllib.parse
import http.client

BASE, MODEL = sys.argv[1], sys.argv[2]
URL = urllib.parse.urlparse(BASE)
failures = []


def conn():
    return http.client.HTTPConnection(URL.hostname, URL.port, timeout=120)


def request(method, path, body=None):
    c = conn()
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(what)


def chat(max_tokens, stream=False):
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Write a haiku about GPUs."}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }


def stream_chunks(body, keep=None):
    """The content pieces of a streamed chat completion; stops after `keep`
    chunks (dropping the connection) when given."""
    c = conn()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    pieces, done = [], False
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            done = True
            break
        choice = json.loads(data)["choices"][0]
        pieces.append(choice.get("delta", {}).get("content") or "")
        if keep is not None and len(pieces) >= keep:
            break
    c.close()
    return r.status, pieces, done


deadline = time.time() + 90
while True:
    try:
        status, models = request("GET", "/v1/models")
        break
    except OSError:
        if time.time() > deadline:
            check("server answers within 90 s", False)
            sys.exit(1)
        time.sleep(0.5)
check("/v1/models lists the model", status == 200 and any(m["id"].split(":")[0] == MODEL for m in models["data"]),
      json.dumps(models)[:200])

t = time.time()
status, reply = request("POST", "/v1/chat/completions", chat(32))
text = reply["choices"][0]["message"]["content"] if status == 200 else ""
check("chat completion", status == 200 and reply["usage"]["completion_tokens"] > 0,
      f"{status}, {reply['usage'] if status == 200 else reply}, {time.time() - t:.2f} s")

status, pieces, done = stream_chunks(chat(32, stream=True))
check("streamed chat equals the plain one (greedy)", status == 200 and done and "".join(pieces) == text,
      f"{len(pieces)} chunks")

status, ps = request("GET", "/api/ps")
devices = [m.get("device") for m in (ps or {}).get("models", [])]
check("/api/ps reports a CUDA device", status == 200 and any(str(d).startswith("cuda") for d in devices),
      str(devices))

status, pieces, _ = stream_chunks(chat(2000, stream=True), keep=3)
check("a stream dropped after 3 chunks", status == 200 and len(pieces) == 3)
status, reply = request("POST", "/v1/chat/completions", chat(8))
check("the next request answers", status == 200)

results = []


def one(i):
    body = chat(24)
    body["messages"][0]["content"] = f"Count to {i + 3}."
    results.append(request("POST", "/v1/chat/completions", body)[0])


t = time.time()
threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
for th in threads:
    th.start()
for th in threads:
    th.join()
check("eight requests at once", results == [200] * 8, f"{results}, {time.time() - t:.2f} s")

print(f"serve-check: {'FAIL' if failures else 'ok'} ({len(failures)} failed)")
sys.exit(1 if failures else 0)
