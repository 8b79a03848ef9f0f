"""`hf.co/ORG/REPO[:QUANT]` pulls against a local stand-in for the Hugging
Face Hub (HF_ENDPOINT), served the way the Hub answers: the repo's file list
at /api/models/ORG/REPO, files at /ORG/REPO/resolve/main/FILE with the
sha256 in X-Linked-Etag and HTTP Range support."""

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ollama
import pytest
import requests

from conftest import MODEL_FILE, Server, models_dir

REPO = "test-org/SmolLM2-135M-Instruct-GGUF"
FILES = ["SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf", "README.md"]


class FakeHub:
    def __init__(self, data: bytes):
        self.data = data
        self.digest = hashlib.sha256(data).hexdigest()
        self.requests: list[tuple[str, str | None]] = []
        self.cut_next_transfer_at: int | None = None
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                hub.requests.append((self.path, rng))
                if self.path == f"/api/models/{REPO}":
                    body = json.dumps({"id": REPO, "siblings": [{"rfilename": f} for f in FILES]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path != f"/{REPO}/resolve/main/{FILES[0]}":
                    self.send_error(404)
                    return
                start = 0
                if rng:
                    start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
                body = hub.data[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(hub.data) - 1}/{len(hub.data)}")
                self.send_header("X-Linked-Etag", f'"{hub.digest}"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = hub.cut_next_transfer_at
                if cut is not None:
                    hub.cut_next_transfer_at = None
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.connection.close()
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def hub():
    h = FakeHub((models_dir() / MODEL_FILE).read_bytes())
    yield h
    h.close()


def test_hf_pull_picks_the_quant_resumes_and_verifies(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    s = Server(tmp_path)
    try:
        client = ollama.Client(host=s.url)
        # The first transfer breaks after 1 MiB: the pull fails with a clear
        # error and registers nothing.
        hub.cut_next_transfer_at = 1 << 20
        with pytest.raises(ollama.ResponseError) as e:
            list(client.pull(f"hf.co/{REPO}:Q4_1", stream=True))
        assert "interrupted" in str(e.value) or "resolve/main" in str(e.value), str(e.value)
        assert not [m for m in client.list().models if "smollm2-135m-instruct-gguf" in m.model.lower()]

        # The repeated pull resumes with Range and completes with the digest.
        events = list(client.pull(f"hf.co/{REPO}:Q4_1", stream=True))
        assert events[-1].status == "success"
        totals = {e.total for e in events if e.total}
        assert totals == {len(hub.data)}
        file_requests = [r for r in hub.requests if r[0].endswith(".gguf")]
        assert file_requests[0] == (f"/{REPO}/resolve/main/{FILES[0]}", None)
        assert file_requests[-1] == (f"/{REPO}/resolve/main/{FILES[0]}", f"bytes={1 << 20}-")
        assert (s.home / "blobs" / f"sha256-{hub.digest}").exists()

        model = next(m for m in client.list().models if m.model.lower().startswith("hf.co/"))
        assert model.model.lower() == f"hf.co/{REPO}:Q4_1".lower()
        assert model.digest
        r = client.generate(model=model.model, prompt="Hi", options={"num_predict": 2})
        assert r.done

        # A quant the repo lacks: 404-style error naming the files it has.
        r = requests.post(s.url + "/api/pull", json={"model": f"hf.co/{REPO}:Q2_K", "stream": False})
        assert r.status_code >= 400
        assert "Q2_K" in r.json()["error"] and FILES[0] in r.json()["error"]
        # Without streaming, one answer once the pull is done.
        r = requests.post(s.url + "/api/pull", json={"model": f"hf.co/{REPO}:Q4_1", "stream": False})
        assert r.status_code == 200 and r.json() == {"status": "success"}
    finally:
        s.stop()
