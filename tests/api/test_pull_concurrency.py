"""Two pulls of one URL at once: the second waits for the first's download
(one GET, a "waiting for another pull" line) instead of writing the same
partial file, and both end with the right blob."""

import hashlib
import json

import pytest
import requests

from conftest import Server



def test_second_pull_of_a_url_waits_for_the_first(tmp_path, slow_gguf):
    s = Server(tmp_path, "--allow-insecure-pulls")
    try:
        pull = {"model": slow_gguf.url}
        first = requests.post(s.url + "/api/pull", json=pull, stream=True)
        first_lines = (json.loads(line) for line in first.iter_lines())
        for progress in first_lines:  # the first download is under way, then stalls
            assert "error" not in progress, progress
            if progress.get("completed"):
                break
        second = requests.post(s.url + "/api/pull", json=pull, stream=True)
        second_lines = (json.loads(line) for line in second.iter_lines())
        for progress in second_lines:
            assert progress.get("status") != "success", "the second pull downloaded on its own"
            assert "error" not in progress, progress
            if progress["status"].startswith("waiting for another pull"):
                break
        else:
            pytest.fail("the second pull ended without waiting")
        slow_gguf.release.set()
        assert list(first_lines)[-1] == {"status": "success"}
        assert list(second_lines)[-1] == {"status": "success"}
        assert len(slow_gguf.ranges) == 1, f"downloads: {slow_gguf.ranges}"
        want = hashlib.sha256(slow_gguf.data).hexdigest()
        blob = s.home / "blobs" / f"sha256-{want}"
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == want
        r = requests.post(s.url + "/api/generate", json={
            "model": "crash-smol", "prompt": "Hi", "stream": False, "options": {"num_predict": 2}})
        assert r.status_code == 200 and r.json()["done"]
    finally:
        s.stop()
