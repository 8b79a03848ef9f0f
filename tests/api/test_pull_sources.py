"""Which sources a daemon pulls from: paths on its machine only with
--allow-local-pulls (`mlxr pull PATH` uploads the files instead and needs no
flag), plain http:// only with --allow-insecure-pulls, also on redirects."""

import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ollama
import pytest
import requests

from conftest import MODEL_FILE, ROOT, Server, models_dir

TINY = ROOT / "tests/fixtures/tiny-models"


class FileServer:
    """Serves `files` ({"/path": bytes}) and `redirects` ({"/path": url}) over
    plain http; records the paths asked for."""

    def __init__(self, files: dict[str, bytes], redirects: dict[str, str] | None = None):
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(self.path)
                if self.path in (redirects or {}):
                    self.send_response(302)
                    self.send_header("Location", redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path in files:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(files[self.path])))
                    self.end_headers()
                    self.wfile.write(files[self.path])
                else:
                    self.send_error(404)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def tags(server) -> list[str]:
    return sorted(m["model"] for m in requests.get(server.url + "/api/tags").json()["models"])


def logged(server, method: str, path_prefix: str) -> int:
    """How many requests the server logged for `method path_prefix...`."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", server.read_log())
    return len(re.findall(f'method={method} path="{re.escape(path_prefix)}', log))


def mlxr(server, *args: str) -> subprocess.CompletedProcess:
    binary = os.environ.get("MLXR_BIN", str(ROOT / "target/release/mlxr"))
    return subprocess.run([binary, *args], env={**os.environ, "MLXR_HOST": server.url},
                          capture_output=True, text=True, timeout=300)


def test_local_path_pull_is_refused_by_default(server, tmp_path):
    src = tmp_path / "refused-smol.gguf"
    src.write_bytes((models_dir() / MODEL_FILE).read_bytes())
    before = tags(server)
    blobs = sorted(os.listdir(server.home / "blobs"))
    # An existing file, a folder and a missing path get the same answer.
    for spec in [str(src), str(TINY / "qwen2"), str(tmp_path / "missing.gguf")]:
        r = requests.post(server.url + "/api/pull", json={"model": spec})
        assert r.status_code == 403, r.text
        error = r.json()["error"]
        for hint in ["--allow-local-pulls", "mlxr pull", "mlxr create"]:
            assert hint in error, error
    with pytest.raises(ollama.ResponseError) as e:
        list(ollama.Client(host=server.url).pull(str(src), stream=True))
    assert e.value.status_code == 403
    assert tags(server) == before
    assert sorted(os.listdir(server.home / "blobs")) == blobs


def test_local_path_pull_with_the_environment_variable(tmp_path, monkeypatch):
    src = tmp_path / "env-smol.gguf"
    src.write_bytes((models_dir() / MODEL_FILE).read_bytes())
    monkeypatch.setenv("MLXR_ALLOW_LOCAL_PULLS", "true")
    s = Server(tmp_path)
    try:
        r = requests.post(s.url + "/api/pull", json={"model": str(src), "stream": False})
        assert r.status_code == 200, r.text
        assert "env-smol:latest" in tags(s)
    finally:
        s.stop()


def test_cli_pull_of_a_local_file_and_folder_uploads_them(server, tmp_path):
    src = tmp_path / "cli-smol.gguf"
    src.write_bytes((models_dir() / MODEL_FILE).read_bytes())
    out = mlxr(server, "pull", str(src))
    assert out.returncode == 0, out.stderr
    assert "success" in out.stderr
    assert "cli-smol:latest" in tags(server)
    r = ollama.Client(host=server.url).chat(model="cli-smol", messages=[{"role": "user", "content": "Hi"}],
                                            options={"num_predict": 3, "temperature": 0})
    assert r.done and r.message.content

    # Pulled again: the daemon has the blob, nothing is uploaded.
    heads, posts = logged(server, "HEAD", "/api/blobs/"), logged(server, "POST", "/api/blobs/")
    pulls = logged(server, "POST", "/api/pull")
    assert posts >= 1
    out = mlxr(server, "pull", str(src))
    assert out.returncode == 0, out.stderr
    assert logged(server, "HEAD", "/api/blobs/") == heads + 1
    assert logged(server, "POST", "/api/blobs/") == posts
    assert logged(server, "POST", "/api/pull") == pulls

    out = mlxr(server, "pull", str(TINY / "qwen2"))
    assert out.returncode == 0, out.stderr
    model = next(m for m in ollama.Client(host=server.url).list().models if m.model.startswith("qwen2"))
    assert model.details.family == "qwen2" and model.details.format == "safetensors"
    r = ollama.Client(host=server.url).chat(model=model.model, messages=[{"role": "user", "content": "Hi"}],
                                            options={"num_predict": 3, "temperature": 0})
    assert r.done


def test_http_url_pull_needs_allow_insecure_pulls(server, tmp_path):
    files = FileServer({"/models/http-smol.gguf": (models_dir() / MODEL_FILE).read_bytes()})
    url = files.url + "/models/http-smol.gguf"
    try:
        before = tags(server)
        r = requests.post(server.url + "/api/pull", json={"model": url})
        assert r.status_code == 403, r.text
        assert "--allow-insecure-pulls" in r.json()["error"]
        assert tags(server) == before and files.requests == []

        s = Server(tmp_path, "--allow-insecure-pulls")
        try:
            events = list(ollama.Client(host=s.url).pull(url, stream=True))
            assert events[-1].status == "success"
            r = ollama.Client(host=s.url).generate(model="http-smol", prompt="Hi", options={"num_predict": 2})
            assert r.done
        finally:
            s.stop()
    finally:
        files.close()


def test_a_redirect_to_plain_http_is_refused(tmp_path, monkeypatch):
    """The Hub endpoint the operator set is trusted over http; a redirect from
    it to another http origin is not."""
    target = FileServer({"/m.gguf": (models_dir() / MODEL_FILE).read_bytes()})
    hub = FileServer({}, {"/org/repo/resolve/main/m.gguf": target.url + "/m.gguf"})
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    s = Server(tmp_path)
    try:
        with pytest.raises(ollama.ResponseError) as e:
            list(ollama.Client(host=s.url).pull("hf.co/org/repo:m.gguf", stream=True))
        assert "--allow-insecure-pulls" in str(e.value) and target.url in str(e.value)
        assert hub.requests == ["/org/repo/resolve/main/m.gguf"] and target.requests == []
        assert tags(s) == ["all-minilm:latest", "smollm2:latest"]
    finally:
        s.stop()
        hub.close()
        target.close()
