"""`hf.co/ORG/REPO[:QUANT]` pulls against a local stand-in for the Hugging
Face Hub (HF_ENDPOINT), served the way the Hub answers: the repo's file list
at /api/models/ORG/REPO, files at /ORG/REPO/resolve/main/FILE with the
sha256 in X-Linked-Etag and HTTP Range support.

The stand-in is plain http; an HF_ENDPOINT set in the daemon's environment
is the operator's choice, so its origin is trusted without
--allow-insecure-pulls (a redirect elsewhere over http is not: see
test_pull_sources.py)."""

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ollama
import pytest
import requests

from conftest import MODEL_FILE, ROOT, Server, models_dir

REPO = "test-org/SmolLM2-135M-Instruct-GGUF"
FILES = ["SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf", "README.md"]
TINY = ROOT / "tests/fixtures/tiny-models"
MLX_REPO = "test-org/tiny-qwen3-mlx-4bit"
SHARDED_REPO = "test-org/tiny-qwen2"


class FakeHub:
    """Serves `repos` ({"org/name": {file: bytes}}); only the GGUF repo's
    first file can be told to break off after `cut_next_transfer_at` bytes."""

    def __init__(self, repos: dict[str, dict[str, bytes]]):
        self.repos = repos
        self.requests: list[tuple[str, str | None]] = []
        self.cut_next_transfer_at: int | None = None
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                hub.requests.append((self.path, rng))
                for repo, files in hub.repos.items():
                    if self.path == f"/api/models/{repo}":
                        body = json.dumps({"id": repo, "siblings": [{"rfilename": f} for f in files]}).encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    prefix = f"/{repo}/resolve/main/"
                    if self.path.startswith(prefix) and self.path[len(prefix):] in files:
                        self.send_file(files[self.path[len(prefix):]], rng)
                        return
                self.send_error(404)

            def send_file(self, data: bytes, rng: str | None):
                start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1)) if rng else 0
                body = data[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                # Like the Hub: LFS files carry their sha256, small git files a sha1 ETag.
                if len(data) > 100_000:
                    self.send_header("X-Linked-Etag", f'"{hashlib.sha256(data).hexdigest()}"')
                else:
                    self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
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


def folder_files(name: str) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in (TINY / name).iterdir() if f.is_file()}


@pytest.fixture
def hub():
    gguf = (models_dir() / MODEL_FILE).read_bytes()
    h = FakeHub({
        REPO: {FILES[0]: gguf, FILES[1]: b"not used", FILES[2]: b"# readme"},
        MLX_REPO: folder_files("qwen3-mlx-q4-g128"),
        SHARDED_REPO: folder_files("qwen2"),
    })
    h.data = gguf
    h.digest = hashlib.sha256(gguf).hexdigest()
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


def test_hf_pull_of_safetensors_repos(hub, tmp_path, monkeypatch):
    """Repositories without GGUF files are pulled as model folders: an MLX
    4-bit conversion and a sharded transformers checkpoint."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    s = Server(tmp_path)
    try:
        client = ollama.Client(host=s.url)
        for repo, family, quant in [(MLX_REPO, "qwen3", "MLX_Q4"), (SHARDED_REPO, "qwen2", "F16")]:
            events = list(client.pull(f"hf.co/{repo}", stream=True))
            assert events[-1].status == "success"
            fetched = {p.rsplit("/", 1)[1] for p, _ in hub.requests if p.startswith(f"/{repo}/resolve/")}
            assert "config.json" in fetched and "tokenizer.json" in fetched
            assert not any(f.endswith(".md") for f in fetched)
            model = next(m for m in client.list().models if m.model.lower().startswith(f"hf.co/{repo}".lower()))
            assert (model.details.family, model.details.quantization_level) == (family, quant)
            r = client.chat(model=model.model, messages=[{"role": "user", "content": "Hi"}],
                            options={"num_predict": 3, "temperature": 0})
            assert r.done
        shards = {p.rsplit("/", 1)[1] for p, _ in hub.requests if p.startswith(f"/{SHARDED_REPO}/resolve/")}
        assert {"model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors",
                "model.safetensors.index.json"} <= shards
    finally:
        s.stop()
