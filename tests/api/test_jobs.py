"""`/api/mlxr/jobs`: a quantize that outlives its request. The job runs
`/api/create`'s quantize (the same blob `mlxr quantize` writes), reports its
progress while it runs, registers the model at its end; a cancelled one
registers nothing and leaves no files; bad requests are errors before any
job starts; a foreign web page cannot start one."""

import hashlib
import subprocess
import time

import requests

from conftest import ROOT, leftovers, mlxr_bin, names, upload

TINY = ROOT / "tests/fixtures/tiny-models/gguf/llama.f32.gguf"


def job(server, job_id):
    r = requests.get(f"{server.url}/api/mlxr/jobs/{job_id}", timeout=10)
    assert r.ok, r.text
    return r.json()


def wait(server, job_id, until, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = job(server, job_id)
        if until(j):
            return j
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never got there: {j}")


def test_a_job_quantizes_as_mlxr_quantize_does(server, tmp_path):
    digest = upload(server, TINY)
    r = requests.post(server.url + "/api/create", json={"model": "job-f32", "files": {"llama.f32.gguf": digest}})
    assert r.ok, r.text
    r = requests.post(server.url + "/api/mlxr/jobs",
                      json={"model": "job-q8", "from": "job-f32", "quantize": "q8_0"}, timeout=60)
    assert r.status_code == 202, r.text
    started = r.json()
    assert started["model"] == "job-q8" and started["quantize"] == "q8_0", started
    done = wait(server, started["id"], lambda j: j["status"] not in ("running", "registering"))
    assert done["status"] == "success", done
    assert done["progress"] == {"status": "success"}, done
    assert "job-q8:latest" in names(server)

    out = tmp_path / "job-q8.gguf"
    ran = subprocess.run([mlxr_bin(), "quantize", str(TINY), str(out), "--type", "Q8_0"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    want = "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()
    blob = server.home / "blobs" / want.replace(":", "-")
    assert blob.is_file() and blob.read_bytes() == out.read_bytes()

    listed = requests.get(server.url + "/api/mlxr/jobs", timeout=10).json()["jobs"]
    assert listed[0]["id"] == started["id"] and listed[0]["status"] == "success", listed
    # Finished: nothing to cancel.
    r = requests.delete(f"{server.url}/api/mlxr/jobs/{started['id']}", timeout=10)
    assert r.status_code == 409, r.text
    assert not leftovers(server)


def test_bad_job_requests_start_nothing(server):
    before = requests.get(server.url + "/api/mlxr/jobs", timeout=10).json()["jobs"]
    cases = [
        ({"model": "x", "from": "no-such-model", "quantize": "q8_0"}, 404, "not found"),
        ({"model": "x", "from": "job-f32"}, 400, "quantize"),
        ({"model": "x", "from": "job-f32", "quantize": "q9_X"}, 400, "unknown quantization type"),
        ({"model": "x", "quantize": "q8_0"}, 400, "'files'"),
    ]
    for body, status, message in cases:
        r = requests.post(server.url + "/api/mlxr/jobs", json=body, timeout=30)
        assert r.status_code == status and message in r.json()["error"], (body, r.status_code, r.text)
    r = requests.post(server.url + "/api/mlxr/jobs", data="{not json", timeout=10,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    for method in (requests.get, requests.delete):
        assert method(server.url + "/api/mlxr/jobs/12345", timeout=10).status_code == 404
        assert method(server.url + "/api/mlxr/jobs/not-a-job", timeout=10).status_code == 404
    # A page of another origin cannot start one.
    r = requests.post(server.url + "/api/mlxr/jobs", json={"model": "y", "from": "job-f32", "quantize": "q8_0"},
                      headers={"Origin": "https://evil.example"}, timeout=10)
    assert r.status_code == 403, r.text
    assert requests.get(server.url + "/api/mlxr/jobs", timeout=10).json()["jobs"] == before


def blobs(server):
    return sorted(p.name for p in (server.home / "blobs").iterdir())


def cancel_under_way(server, body):
    """Starts a job of `body`, cancels it at its first progress line with a
    total, and checks that nothing of it stays: no files, no model
    `body["model"]`, the blobs as before. Returns the job as it was then."""
    blobs_before = blobs(server)
    r = requests.post(server.url + "/api/mlxr/jobs", json=body, timeout=60)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    under_way = wait(server, job_id, lambda j: "total" in j["progress"] or j["status"] != "running", timeout=60)
    assert under_way["status"] == "running", under_way
    r = requests.delete(f"{server.url}/api/mlxr/jobs/{job_id}", timeout=10)
    assert r.ok and r.json()["status"] == "cancelled", r.text
    # The run notices at its next tensor; its files go with it.
    deadline = time.time() + 60
    while leftovers(server) and time.time() < deadline:
        time.sleep(0.2)
    assert not leftovers(server), "the cancelled job's files were left behind"
    assert job(server, job_id)["status"] == "cancelled"
    assert f"{body['model']}:latest" not in names(server)
    assert blobs(server) == blobs_before
    return under_way


def test_a_cancelled_job_registers_nothing(server, smollm2_f16):
    under_way = cancel_under_way(server, {"model": "job-q4", "from": smollm2_f16, "quantize": "q4_k_m"})
    # Cancelled with tensors left to do.
    assert under_way["progress"]["completed"] < under_way["progress"]["total"], under_way


def test_a_cancelled_quantize_of_a_folder_model_leaves_nothing(server, smollm2_folder):
    """A folder is converted into a scratch GGUF before it is quantized: a
    cancel in either step leaves neither file."""
    under_way = cancel_under_way(server, {"model": "job-hf-q4", "from": smollm2_folder, "quantize": "q4_k_m"})
    assert under_way["progress"]["status"] in ("converting smol-hf to GGUF", "quantizing smol-hf to Q4_K_M"), under_way