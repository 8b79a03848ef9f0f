"""Raw HTTP: stream framing, disconnects, bad input; the server stays up."""

import json
import re
import socket
import time

import httpx
import requests

from conftest import MODEL


def test_ndjson_has_no_blank_lines(server):
    r = requests.post(server.url + "/api/generate", json={"model": MODEL, "prompt": "Hi", "options": {"num_predict": 8}}, stream=True)
    assert r.headers["content-type"].startswith("application/x-ndjson")
    raw = r.content.decode()
    assert raw.endswith("\n") and "\n\n" not in raw
    lines = raw.splitlines()
    assert all(json.loads(line) for line in lines)
    assert json.loads(lines[-1])["done"] is True


def test_sse_ends_with_done(server):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True}
    r = requests.post(server.url + "/v1/chat/completions", json=body, stream=True)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.content.decode().split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"



# GPT-2 byte tokens of SmolLM2: "âĢ" (bytes E2 80) and "¨" (A8) make U+2028,
# a character Python's splitlines (httpx's aiter_lines, the ollama client's
# stream reader) breaks a line at.
LINE_SEPARATOR_BIAS = {"321": 100, "118": 100}


def test_a_sampled_line_separator_does_not_break_stream_lines(server):
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 6, "temperature": 0,
            "logit_bias": LINE_SEPARATOR_BIAS}
    text = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
    assert "\u2028" in text, f"the bias did not make the model write U+2028: {text!r}"
    with httpx.stream("POST", server.url + "/v1/completions", json=body | {"stream": True}, timeout=60) as r:
        raw = b"".join(r.iter_raw())
    assert "\u2028".encode() not in raw
    lines = [line for line in raw.decode().splitlines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == text


def running_requests(server) -> float:
    text = requests.get(server.url + "/metrics").text
    values = re.findall(r'^mlxr:num_requests_running\{model="[^"]+"\} (\S+)$', text, re.M)
    return sum(float(v) for v in values)


def test_disconnect_mid_stream_frees_the_request(server):
    body = json.dumps({"model": MODEL, "prompt": "Count to a thousand:", "stream": True,
                       "options": {"num_predict": 2000, "temperature": 0}}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while got.count(b"\n") < 12:
        got += s.recv(4096)
    assert running_requests(server) == 1
    s.close()
    deadline = time.time() + 10
    while running_requests(server) != 0:
        assert time.time() < deadline, "the abandoned request is still running"
        time.sleep(0.05)
    text = requests.get(server.url + "/metrics").text
    assert re.search(r'mlxr:request_success_total\{model="[^"]+",finished_reason="abort"\} [1-9]', text)


def test_bad_input_gets_clear_errors(server):
    url = server.url
    cases = [
        ("/api/generate", b"{not json", 400),
        ("/api/chat", b'{"model": 3, "messages": []}', 400),
        ("/v1/chat/completions", b'{"model": "smollm2", "messages": "hi"}', 400),
        ("/v1/completions", b'{"model": "smollm2", "prompt": {"a": 1}}', 400),
        ("/v1/completions", b'{"model": "smollm2", "prompt": [999999999]}', 400),
        ("/v1/chat/completions", b"", 400),
    ]
    for path, body, status in cases:
        r = requests.post(url + path, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == status, (path, body, r.status_code, r.text)
        err = r.json()["error"]
        assert (err if isinstance(err, str) else err["message"]), (path, r.text)
    huge = b'{"model": "smollm2", "prompt": "' + b"a" * (40 << 20) + b'"}'
    r = requests.post(url + "/api/generate", data=huge, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    r = requests.get(url + "/no/such/route")
    assert r.status_code == 404
    assert server.alive()


def test_cors_allows_localhost_only(server):
    ok = requests.options(server.url + "/api/tags", headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "GET"})
    assert ok.headers.get("access-control-allow-origin") == "http://localhost:3000"
    bad = requests.options(server.url + "/api/tags", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in bad.headers


def test_version_is_numeric(server):
    v = requests.get(server.url + "/api/version").json()["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", v)
