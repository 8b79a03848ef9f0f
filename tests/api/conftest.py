"""Starts a real `mlxr serve` on SmolLM2 for the API tests.

MLXR_BIN (default target/release/mlxr) and MLXR_MODELS_DIR (default
~/.cache/mlxr/models) say where the binary and the model are.
"""

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"
EMBED_DIR = "all-MiniLM-L6-v2"
EMBED_MODEL = "all-minilm"


def models_dir() -> Path:
    return Path(os.environ.get("MLXR_MODELS_DIR", Path.home() / ".cache/mlxr/models"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary() -> str:
    return os.environ.get("MLXR_BIN", str(ROOT / "target/release/mlxr"))


def serve_flags(*wanted: str) -> list[str]:
    """The flags of `wanted` this `mlxr serve` has (newer builds make http://
    pulls opt-in; older ones take them without a flag)."""
    help_text = subprocess.run([binary(), "serve", "--help"], capture_output=True, text=True).stdout
    return [f for f in wanted if re.search(rf"{re.escape(f)}\b", help_text)]


class Server:
    def __init__(self, tmp: Path, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.home = tmp / "home"
        model = models_dir() / MODEL_FILE
        embedder = models_dir() / EMBED_DIR
        for path in (model, embedder):
            if not path.exists():
                pytest.fail(f"{path} missing: run scripts/fetch-models.sh")
        self.log = open(tmp / "server.log", "w")
        self.proc = subprocess.Popen(
            [binary(), "serve", "-m", str(model), "--name", MODEL, "-m", str(embedder), "--name", EMBED_MODEL,
             "--home", str(self.home),
             "--host", f"127.0.0.1:{self.port}", "--kv-cache-mem", "256MiB", *extra],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"mlxr serve exited with {self.proc.returncode}: {self.read_log()}")
            try:
                if requests.get(self.url + "/", timeout=1).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.1)
        pytest.fail("mlxr serve did not start: " + self.read_log())

    def read_log(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None and requests.get(self.url + "/", timeout=5).ok

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr-key"), "--api-key", "sekrit")
    yield s
    s.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "load: the load test, MLXR_LOAD_SECONDS long (-m 'not load' leaves it out)")
