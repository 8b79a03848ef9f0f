"""`/api/mlxr/jobs` with `kind: "convert"`: a folder model converted to
GGUF, or a GGUF model to a folder, as `mlxr convert` does, as a job (the
quantize job's progress, cancel and registration); the new model runs; a cancelled one registers nothing
and leaves no files; bad requests are errors before any job starts; a
foreign web page cannot start one."""

import hashlib
import json
import shutil
import subprocess
import time

import requests

from conftest import ROOT, create_folder, leftovers, mlxr_bin, names, upload
from test_jobs import cancel_under_way, job, wait

TINY_FOLDER = ROOT / "tests/fixtures/tiny-models/llama"
TINY_GGUF = ROOT / "tests/fixtures/tiny-models/gguf/llama.f32.gguf"


def jobs(server):
    return requests.get(server.url + "/api/mlxr/jobs", timeout=10).json()["jobs"]


def test_a_convert_job_writes_what_mlxr_convert_writes(server, tmp_path):
    create_folder(server, "tiny-llama", TINY_FOLDER)
    r = requests.post(server.url + "/api/mlxr/jobs",
                      json={"kind": "convert", "model": "tiny-llama-gguf", "from": "tiny-llama", "outtype": "f32",
                            "tokenizer_pre": "qwen2"},
                      timeout=60)
    assert r.status_code == 202, r.text
    started = r.json()
    assert (started["kind"], started["model"], started["outtype"]) == ("convert", "tiny-llama-gguf", "f32"), started
    assert "quantize" not in started, started
    done = wait(server, started["id"], lambda j: j["status"] not in ("running", "registering"))
    assert done["status"] == "success" and done["progress"] == {"status": "success"}, done
    assert "tiny-llama-gguf:latest" in names(server)

    # `mlxr convert` of the same folder (named as the source model: the
    # GGUF's general.name comes from it) writes the same bytes.
    folder = tmp_path / "tiny-llama"
    shutil.copytree(TINY_FOLDER, folder)
    out = tmp_path / "tiny-llama.gguf"
    ran = subprocess.run([mlxr_bin(), "convert", str(folder), str(out), "--outtype", "f32", "--tokenizer-pre", "qwen2"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    want = "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
    blob = server.home / "blobs" / want.replace(":", "-")
    assert blob.is_file() and blob.read_bytes() == out.read_bytes()

    shown = requests.post(server.url + "/api/show", json={"model": "tiny-llama-gguf"}, timeout=10).json()
    assert shown["details"]["format"] == "gguf", shown["details"]
    r = requests.post(server.url + "/api/generate", timeout=120, json={
        "model": "tiny-llama-gguf", "prompt": "hi", "stream": False, "options": {"num_predict": 3, "temperature": 0}})
    assert r.ok and r.json()["eval_count"] > 0, r.text
    requests.post(server.url + "/api/generate", json={"model": "tiny-llama-gguf", "keep_alive": 0}, timeout=30)
    assert jobs(server)[0]["id"] == started["id"]
    assert not leftovers(server)


def test_a_source_named_as_the_output_file_converts(server):
    """The run links the source folder under its name in a scratch folder
    where it also writes model.gguf: the two never meet."""
    create_folder(server, "model.gguf", TINY_FOLDER)
    r = requests.post(server.url + "/api/mlxr/jobs", timeout=60, json={
        "kind": "convert", "model": "named-gguf", "from": "model.gguf", "outtype": "q8_0", "tokenizer_pre": "qwen2"})
    assert r.status_code == 202, r.text
    done = wait(server, r.json()["id"], lambda j: j["status"] not in ("running", "registering"))
    assert done["status"] == "success", done
    assert not leftovers(server)


def test_a_convert_job_turns_a_gguf_model_into_a_folder_model(server, tmp_path):
    digest = upload(server, TINY_GGUF)
    r = requests.post(server.url + "/api/create", json={"model": "tiny-gguf", "files": {"llama.f32.gguf": digest}})
    assert r.ok, r.text
    r = requests.post(server.url + "/api/mlxr/jobs",
                      json={"kind": "convert", "model": "tiny-back-hf", "from": "tiny-gguf", "outtype": "f16"}, timeout=60)
    assert r.status_code == 202, r.text
    done = wait(server, r.json()["id"], lambda j: j["status"] not in ("running", "registering"))
    assert done["status"] == "success", done

    # Every file `mlxr convert` writes for the GGUF is a blob of the new model.
    out = tmp_path / "hf"
    ran = subprocess.run([mlxr_bin(), "convert", str(TINY_GGUF), str(out), "--outtype", "f16"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    written = sorted(p.name for p in out.iterdir())
    assert "model.safetensors" in written and "config.json" in written, written
    for name in written:
        blob = server.home / "blobs" / ("sha256-" + hashlib.sha256((out / name).read_bytes()).hexdigest())
        assert blob.is_file(), f"{name} of `mlxr convert` is no blob of the new model"
    shown = requests.post(server.url + "/api/show", json={"model": "tiny-back-hf"}, timeout=10).json()
    assert (shown["details"]["format"], shown["details"]["quantization_level"]) == ("safetensors", "F16"), shown["details"]
    r = requests.post(server.url + "/api/generate", timeout=120, json={
        "model": "tiny-back-hf", "prompt": "hi", "stream": False, "options": {"num_predict": 3, "temperature": 0}})
    assert r.ok and r.json()["eval_count"] > 0, r.text
    requests.post(server.url + "/api/generate", json={"model": "tiny-back-hf", "keep_alive": 0}, timeout=30)
    assert not leftovers(server)


def test_bad_convert_requests_start_nothing(server):
    upload_gguf = upload(server, TINY_GGUF)
    r = requests.post(server.url + "/api/create", json={"model": "convert-gguf", "files": {"m.gguf": upload_gguf}})
    assert r.ok, r.text
    config = json.loads((TINY_FOLDER / "config.json").read_text())
    config["architectures"] = ["FalconForCausalLM"]
    create_folder(server, "convert-falcon", TINY_FOLDER, replace={"config.json": json.dumps(config).encode()})
    create_folder(server, "convert-tiny", TINY_FOLDER)
    before = jobs(server)
    cases = [
        ({"kind": "convert", "model": "x", "from": "no-such-model"}, 404, "not found"),
        ({"kind": "convert", "model": "x", "from": "convert-gguf", "outtype": "q8_0"}, 400,
         "outtype 'q8_0' cannot be written to a Hugging Face folder"),
        ({"kind": "convert", "model": "x", "from": "convert-falcon"}, 400, "FalconForCausalLM"),
        ({"kind": "convert", "model": "x", "from": "convert-tiny"}, 400, "a convert job's tokenizer_pre"),
        ({"kind": "convert", "model": "x", "from": "convert-falcon", "outtype": "q4_0"}, 400, "unknown outtype 'q4_0'"),
        ({"kind": "convert", "model": "x"}, 400, "'from'"),
        ({"kind": "convert", "model": "x", "from": "convert-falcon", "outtype": 16}, 400, "invalid request"),
        ({"kind": "frobnicate", "model": "x", "from": "convert-falcon"}, 400, "unknown job kind 'frobnicate'"),
    ]
    for body, status, message in cases:
        r = requests.post(server.url + "/api/mlxr/jobs", json=body, timeout=30)
        assert r.status_code == status and message in r.json()["error"], (body, r.status_code, r.text)
    r = requests.post(server.url + "/api/mlxr/jobs", json={"kind": "convert", "model": "y", "from": "convert-falcon"},
                      headers={"Origin": "https://evil.example"}, timeout=10)
    assert r.status_code == 403, r.text
    assert jobs(server) == before
    assert "x:latest" not in names(server) and not leftovers(server)


def test_a_cancelled_convert_job_registers_nothing(server, smollm2_folder):
    under_way = cancel_under_way(
        server, {"kind": "convert", "model": "job-gguf", "from": smollm2_folder, "outtype": "q8_0"})
    assert under_way["progress"]["status"] == "converting smol-hf:latest to GGUF (q8_0)", under_way
    assert under_way["progress"]["completed"] < under_way["progress"]["total"], under_way
