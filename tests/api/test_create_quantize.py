"""Ollama's `/api/create` with `quantize` (as `ollama create --quantize`):
the new model's weights are the bytes `mlxr quantize` (llama-quantize's
output, bit for bit) writes for the same file, progress streams, bad
sources and types are 400s, and a client that goes away leaves nothing."""

import hashlib
import json
import subprocess
import time

import requests

from conftest import MODEL_FILE, ROOT, leftovers, mlxr_bin, models_dir, names, upload

TINY = ROOT / "tests/fixtures/tiny-models/gguf/llama.f32.gguf"


def test_quantize_on_create_equals_mlxr_quantize(server, tmp_path):
    digest = upload(server, TINY)
    r = requests.post(server.url + "/api/create", json={"model": "tiny-f32", "files": {"llama.f32.gguf": digest}})
    assert r.ok, r.text
    r = requests.post(server.url + "/api/create",
                      json={"model": "tiny-q8", "from": "tiny-f32", "quantize": "q8_0"}, stream=True)
    assert r.ok, r.text
    lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[-1] == {"status": "success"}, lines
    progress = [l for l in lines if "total" in l]
    assert progress and progress[0]["status"] == "quantizing F32 model to Q8_0", lines
    assert [p["completed"] for p in progress] == list(range(progress[0]["total"])), progress
    new_layer = next(l["status"] for l in lines if l["status"].startswith("creating new layer"))

    out = tmp_path / "tiny-q8.gguf"
    done = subprocess.run([mlxr_bin(), "quantize", str(TINY), str(out), "--type", "Q8_0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    want = "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
    assert new_layer == f"creating new layer {want}", (new_layer, want)
    blob = server.home / "blobs" / want.replace(":", "-")
    assert blob.read_bytes() == out.read_bytes()
    shown = requests.post(server.url + "/api/show", json={"model": "tiny-q8"}, timeout=10).json()
    assert shown["details"]["quantization_level"] == "Q8_0", shown["details"]
    reply = requests.post(server.url + "/api/generate", json={
        "model": "tiny-q8", "prompt": "hello", "stream": False, "options": {"num_predict": 3}}, timeout=120)
    assert reply.ok and reply.json()["eval_count"] <= 3, reply.text

    # Without streaming: one answer once it is done.
    r = requests.post(server.url + "/api/create",
                      json={"model": "tiny-q4", "from": "tiny-f32", "quantize": "Q4_K_M", "stream": False})
    assert r.ok and r.json() == {"status": "success"}, r.text
    assert "tiny-q4:latest" in names(server)
    assert not leftovers(server), "the quantizer's files were left behind"


def test_quantize_of_a_folder_model_equals_mlxr_quantize_of_the_folder(server, smollm2_folder, smollm2_folder_path,
                                                                      tmp_path):
    r = requests.post(server.url + "/api/create",
                      json={"model": "smol-hf-q8", "from": smollm2_folder, "quantize": "q8_0"}, stream=True)
    assert r.ok, r.text
    lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[-1] == {"status": "success"}, lines[-3:]
    steps = [l["status"] for l in lines if "total" in l]
    assert steps[0] == "converting smol-hf to GGUF" and steps[-1] == "quantizing smol-hf to Q8_0", sorted(set(steps))
    new_layer = next(l["status"] for l in lines if l["status"].startswith("creating new layer"))

    out = tmp_path / "smol-hf-q8.gguf"
    done = subprocess.run([mlxr_bin(), "quantize", str(smollm2_folder_path), str(out), "--type", "Q8_0"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    want = "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
    assert new_layer == f"creating new layer {want}", (new_layer, want)
    shown = requests.post(server.url + "/api/show", json={"model": "smol-hf-q8"}, timeout=10).json()
    assert (shown["details"]["format"], shown["details"]["quantization_level"]) == ("gguf", "Q8_0"), shown["details"]
    assert not leftovers(server), "the converter's or quantizer's files were left behind"


def test_bad_quantize_requests_are_400s_and_create_nothing(server):
    digest = upload(server, models_dir() / MODEL_FILE)
    r = requests.post(server.url + "/api/create", json={"model": "smol-q41", "files": {MODEL_FILE: digest}})
    assert r.ok, r.text
    before = names(server)
    cases = [
        ({"model": "bad-type", "from": "smol-q41", "quantize": "q9_X"}, "unknown quantization type"),
        ({"model": "requantized", "from": "smol-q41", "quantize": "q8_0"}, "already quantized"),
        ({"model": "nowhere", "from": "no-such-model", "quantize": "q8_0"}, "not found"),
    ]
    for body, message in cases:
        for stream in (True, False):
            r = requests.post(server.url + "/api/create", json={**body, "stream": stream}, timeout=60)
            assert r.status_code in (400, 404), (body, r.status_code, r.text)
            assert message in r.json()["error"], (body, r.text)
    assert names(server) == before


def test_a_client_that_goes_away_cancels_and_leaves_nothing(server, smollm2_f16):
    blobs_before = sorted(p.name for p in (server.home / "blobs").iterdir())
    r = requests.post(server.url + "/api/create",
                      json={"model": "smol-q4", "from": smollm2_f16, "quantize": "q4_k_m"}, stream=True)
    assert r.ok, r.text
    first = json.loads(next(r.iter_lines()))
    assert first["status"] == "quantizing F16 model to Q4_K_M" and first["completed"] < first["total"], first
    r.close()
    # The quantizer notices at its next tensor; its file goes with it.
    deadline = time.time() + 60
    while leftovers(server) and time.time() < deadline:
        time.sleep(0.2)
    assert not leftovers(server), "the cancelled run's files were left behind"
    assert "smol-q4:latest" not in names(server)
    assert sorted(p.name for p in (server.home / "blobs").iterdir()) == blobs_before
