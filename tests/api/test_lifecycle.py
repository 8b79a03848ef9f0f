"""Model lifecycle: the memory cap unloads the least recently used model,
counts weights held by several models (a model and its draft) once, a model
larger than the cap is refused with a clear error, and a request kept
waiting by another request's load past --load-timeout gets 503."""

import threading
import time

import openai
import ollama
import pytest
import requests

from conftest import EMBED_MODEL, MODEL, Server, models_dir
from test_speculative import create

# `--kv-cache-mem 256MiB` (set by Server): SmolLM2 needs ~94 MiB of weights + 256 MiB
# of KV cache; the embedding model ~87 MiB.


def test_memory_cap_unloads_least_recently_used(tmp_path):
    s = Server(tmp_path, "--max-loaded-memory", "400MiB", "--max-loaded-models", "5")
    try:
        client = ollama.Client(host=s.url)
        client.generate(model=MODEL, prompt="hi", options={"num_predict": 1})
        assert [m.model for m in client.ps().models] == ["smollm2:latest"]
        client.embed(model=EMBED_MODEL, input="hello")
        assert [m.model for m in client.ps().models] == ["all-minilm:latest"]
    finally:
        s.stop()


def test_draft_weights_already_loaded_count_once(tmp_path):
    """A copy of SmolLM2 drafted by the loaded SmolLM2 shares its draft's
    weights: 2 x (94 MiB + 256 MiB of KV cache) = 700 MiB fit under 720 MiB,
    where counting the draft's weights again (794 MiB) would unload SmolLM2."""
    s = Server(tmp_path, "--max-loaded-memory", "720MiB", "--max-loaded-models", "5")
    try:
        client = ollama.Client(host=s.url)
        client.generate(model=MODEL, prompt="hi", options={"num_predict": 1})
        r = create(s, "smollm2-drafted", {"speculative.model_draft": MODEL})
        assert r.status_code == 200, r.text
        client.generate(model="smollm2-drafted", prompt="hi", options={"num_predict": 1})
        assert sorted(m.model for m in client.ps().models) == ["smollm2-drafted:latest", "smollm2:latest"]
    finally:
        s.stop()


def test_model_larger_than_the_cap_is_refused(tmp_path):
    s = Server(tmp_path, "--max-loaded-memory", "300MiB")
    try:
        with pytest.raises(ollama.ResponseError) as e:
            ollama.Client(host=s.url).generate(model=MODEL, prompt="hi")
        assert e.value.status_code == 400 and "max-loaded-memory" in str(e.value)
        ollama.Client(host=s.url).embed(model=EMBED_MODEL, input="fits")
    finally:
        s.stop()


def test_request_waiting_on_a_load_gets_503(tmp_path):
    gemma = models_dir() / "gemma-3-270m-q4_k_m.gguf"
    if not gemma.exists():
        pytest.fail(f"{gemma} missing: run scripts/fetch-models.sh")
    s = Server(tmp_path, "-m", str(gemma), "--name", "gemma", "--load-timeout", "20ms")
    try:
        assert requests.get(s.url + "/api/mlxr/config").json()["models"]["load_timeout_s"] == 0.02
        first = {}

        def load_gemma():
            first["r"] = requests.post(s.url + "/api/generate", json={"model": "gemma", "prompt": "", "stream": False})

        loader = threading.Thread(target=load_gemma)
        loader.start()
        deadline = time.time() + 30
        while requests.get(s.url + "/health").status_code != 503:
            assert time.time() < deadline and loader.is_alive(), "the load was never seen in progress"
            time.sleep(0.002)
        # While gemma loads, another request times out waiting, in each API's shape.
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.APIStatusError) as e:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert e.value.status_code == 503 and "load-timeout" in e.value.message
        loader.join()
        assert first["r"].status_code == 200, first["r"].text
        # The load finished; the retry is served.
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        assert r.choices[0].message.content is not None
        assert requests.get(s.url + "/health").status_code == 200
    finally:
        s.stop()
