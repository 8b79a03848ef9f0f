"""Model management through the ollama client: blobs, create, copy,
delete, pull from a local file (on a daemon started with
--allow-local-pulls); a killed pull leaves a consistent registry."""

import hashlib
import json
import signal
import subprocess
import time

import ollama
import pytest
import requests

from conftest import MODEL_FILE, Server, models_dir


@pytest.fixture
def client(server):
    return ollama.Client(host=server.url)


def test_create_from_uploaded_blob_copy_and_delete(client, server):
    path = models_dir() / MODEL_FILE
    digest = client.create_blob(path)
    assert digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert requests.head(f"{server.url}/api/blobs/{digest}").status_code == 200
    client.create(model="tiny-pirate", files={MODEL_FILE: digest},
                  system="You are a pirate. Answer in one short sentence.",
                  parameters={"temperature": 0, "num_predict": 8},
                  messages=[{"role": "user", "content": "Ahoy?"}, {"role": "assistant", "content": "Arr!"}])
    raw = requests.post(server.url + "/api/show", json={"model": "tiny-pirate"}).json()
    assert raw["messages"] == [{"role": "user", "content": "Ahoy?"}, {"role": "assistant", "content": "Arr!"}]
    assert raw["system"].startswith("You are a pirate")
    shown = client.show("tiny-pirate")
    assert "pirate" in shown.modelfile
    r = client.generate(model="tiny-pirate", prompt="Hello!")
    assert r.response.strip() and r.eval_count <= 8

    client.copy("tiny-pirate", "tiny-pirate:copy")
    names = [m.model for m in client.list().models]
    assert {"tiny-pirate:latest", "tiny-pirate:copy"} <= set(names)
    client.delete("tiny-pirate")
    names = [m.model for m in client.list().models]
    assert "tiny-pirate:latest" not in names and "tiny-pirate:copy" in names
    assert "pirate" in client.show("tiny-pirate:copy").modelfile
    client.delete("tiny-pirate:copy")
    with pytest.raises(ollama.ResponseError) as e:
        client.delete("tiny-pirate:copy")
    assert e.value.status_code == 404


def test_blob_with_wrong_digest_is_rejected(server):
    r = requests.post(f"{server.url}/api/blobs/sha256:{'0' * 64}", data=b"not this")
    assert r.status_code == 400
    assert requests.head(f"{server.url}/api/blobs/sha256:{'0' * 64}").status_code == 404


def test_bad_names_are_rejected(client):
    for bad in ["../etc/passwd", "a/../../b", ".hidden"]:
        with pytest.raises(ollama.ResponseError) as e:
            client.copy("smollm2", bad)
        assert e.value.status_code in (400, 404)


def test_pull_from_local_file(tmp_path):
    src = tmp_path / "local-smol.gguf"
    src.write_bytes((models_dir() / MODEL_FILE).read_bytes())
    s = Server(tmp_path, "--allow-local-pulls")
    try:
        client = ollama.Client(host=s.url)
        statuses = [p.status for p in client.pull(str(src), stream=True)]
        assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
        model = next(m for m in client.list().models if "local-smol" in m.model)
        assert model.digest
        r = client.generate(model=model.model, prompt="Hi", options={"num_predict": 2})
        assert r.done
    finally:
        s.stop()


def test_killed_pull_leaves_a_consistent_registry(tmp_path):
    """Kill the daemon mid-pull; the restarted daemon has no half model and
    the next pull completes with the right digest."""
    big = tmp_path / "big-model.gguf"
    data = (models_dir() / MODEL_FILE).read_bytes()
    big.write_bytes(data)
    want = hashlib.sha256(data).hexdigest()
    s = Server(tmp_path, "--allow-local-pulls")
    try:
        r = requests.post(s.url + "/api/pull", json={"model": str(big)}, stream=True)
        for line in r.iter_lines():
            progress = json.loads(line)
            if progress.get("completed"):
                break
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait()
    finally:
        s.stop()
    s = Server(tmp_path, "--allow-local-pulls")
    try:
        client = ollama.Client(host=s.url)
        assert not [m for m in client.list().models if "big-model" in m.model]
        list(client.pull(str(big), stream=True))
        m = next(m for m in client.list().models if "big-model" in m.model)
        shown = requests.post(s.url + "/api/show", json={"model": m.model}).json()
        assert shown["details"]["family"] == "llama"
        blobs = list((s.home / "blobs").glob("sha256-*"))
        assert any(b.name == f"sha256-{want}" for b in blobs)
    finally:
        s.stop()
