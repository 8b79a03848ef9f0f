"""Starts a real `mlxr serve` on SmolLM2 for the API tests.

MLXR_BIN (default target/release/mlxr) and MLXR_MODELS_DIR (default
~/.cache/mlxr/models) say where the binary and the model are.
"""

import hashlib
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"
EMBED_DIR = "all-MiniLM-L6-v2"
EMBED_MODEL = "all-minilm"
# The tool-capable model (structured output and tool tests).
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN = "qwen-coder"


def models_dir() -> Path:
    return Path(os.environ.get("MLXR_MODELS_DIR", Path.home() / ".cache/mlxr/models"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mlxr_bin() -> str:
    return os.environ.get("MLXR_BIN", str(ROOT / "target/release/mlxr"))


def upload(server, path: Path) -> str:
    """`path`'s bytes as a blob of `server`: its digest."""
    data = path.read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    r = requests.post(f"{server.url}/api/blobs/{digest}", data=data, timeout=600)
    assert r.status_code in (200, 201), r.text
    return digest


def create_folder(server, name: str, folder: Path, replace=None) -> None:
    """The files of `folder` uploaded as blobs and registered as the folder
    model `name`; `replace` maps file names to other bytes to upload."""
    files = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        data = (replace or {}).get(path.name, path.read_bytes())
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        r = requests.post(f"{server.url}/api/blobs/{digest}", data=data, timeout=600)
        assert r.status_code in (200, 201), r.text
        files[path.name] = digest
    r = requests.post(server.url + "/api/create", json={"model": name, "files": files}, timeout=60)
    assert r.ok, r.text


def names(server) -> list:
    return [m["name"] for m in requests.get(server.url + "/api/tags", timeout=10).json()["models"]]


def leftovers(server) -> list:
    """What a quantize run left in the registry's scratch folder."""
    tmp = server.home / "tmp"
    return list(tmp.iterdir()) if tmp.exists() else []


class Daemon:
    """`mlxr serve ARGS`, ready once it logs its TCP listener (an event, not a
    poll); a thread copies its output into LOG_PATH."""

    def __init__(self, args, log_path: Path, env=None):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([mlxr_bin(), "serve", *args], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ready = threading.Event()
        self.listening = False
        self.log_copier = threading.Thread(target=self._copy_log, args=(ready,), daemon=True)
        self.log_copier.start()
        if not ready.wait(timeout=60) or not self.listening:
            self.proc.kill()
            pytest.fail(f"mlxr serve did not start (exit {self.proc.poll()}): {self.read_log()}")

    def _copy_log(self, ready: threading.Event):
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            if "listening on http://" in line:
                self.listening = True
                ready.set()
        ready.set()  # exited: the waiter sees `listening` still false

    def read_log(self) -> str:
        return Path(self.log.name).read_text()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_copier.join(timeout=20)
        self.log.close()


class Server(Daemon):
    """The test daemon: SmolLM2 as `smollm2` and MiniLM as `all-minilm` on a
    free port, its registry under TMP/home."""

    def __init__(self, tmp: Path, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.home = tmp / "home"
        model = models_dir() / MODEL_FILE
        embedder = models_dir() / EMBED_DIR
        for path in (model, embedder):
            if not path.exists():
                pytest.fail(f"{path} missing: run scripts/fetch-models.sh")
        super().__init__(
            ["-m", str(model), "--name", MODEL, "-m", str(embedder), "--name", EMBED_MODEL,
             "--home", str(self.home), "--host", f"127.0.0.1:{self.port}", "--kv-cache-mem", "256MiB", *extra],
            tmp / "server.log")

    def alive(self) -> bool:
        return self.proc.poll() is None and requests.get(self.url + "/", timeout=5).ok


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def qwen(tmp_path_factory):
    """The test daemon with Qwen2.5-Coder-0.5B too, as QWEN."""
    model = models_dir() / QWEN_FILE
    if not model.exists():
        pytest.fail(f"{model} missing: run scripts/fetch-models.sh")
    s = Server(tmp_path_factory.mktemp("mlxr-qwen"), "-m", str(model), "--name", QWEN)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr-key"), "--api-key", "sekrit")
    yield s
    s.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "load: the load test, MLXR_LOAD_SECONDS long (-m 'not load' leaves it out)")


@pytest.fixture
def slow_gguf():
    """A GGUF served slowly over plain http (tests that pull it mid-transfer)."""
    from slow_http import SlowGguf  # slow_http imports this module

    srv = SlowGguf()
    yield srv
    srv.close()


@pytest.fixture(scope="session")
def smollm2_f16(server, tmp_path_factory):
    """SmolLM2 dequantized to F16 (float, and big enough for a quantize to
    take a while) as the test daemon's model `smol-f16`, made once."""
    f16 = tmp_path_factory.mktemp("f16") / "smollm2-f16.gguf"
    done = subprocess.run([mlxr_bin(), "quantize", str(models_dir() / MODEL_FILE), str(f16),
                           "--type", "F16", "--allow-requantize"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    digest = upload(server, f16)
    r = requests.post(server.url + "/api/create", json={"model": "smol-f16", "files": {"smollm2-f16.gguf": digest}})
    assert r.ok, r.text
    return "smol-f16"


@pytest.fixture(scope="session")
def smollm2_folder_path(tmp_path_factory) -> Path:
    """SmolLM2 as a Hugging Face folder of F16 weights (`mlxr convert` of the
    GGUF; big enough for a convert to take a while), named as the model
    `smollm2_folder` registers (a GGUF's general.name comes from it)."""
    folder = tmp_path_factory.mktemp("hf") / "smol-hf"
    done = subprocess.run([mlxr_bin(), "convert", str(models_dir() / MODEL_FILE), str(folder),
                           "--outtype", "f16"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.fixture(scope="session")
def smollm2_folder(server, smollm2_folder_path):
    """`smollm2_folder_path` as the test daemon's folder model `smol-hf`, made once."""
    create_folder(server, "smol-hf", smollm2_folder_path)
    return "smol-hf"
