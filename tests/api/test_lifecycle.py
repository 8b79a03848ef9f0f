"""Model lifecycle: the memory cap unloads the least recently used model,
and a model larger than the cap is refused with a clear error."""

import ollama
import pytest

from conftest import EMBED_MODEL, MODEL, Server

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


def test_model_larger_than_the_cap_is_refused(tmp_path):
    s = Server(tmp_path, "--max-loaded-memory", "300MiB")
    try:
        with pytest.raises(ollama.ResponseError) as e:
            ollama.Client(host=s.url).generate(model=MODEL, prompt="hi")
        assert e.value.status_code == 400 and "max-loaded-memory" in str(e.value)
        ollama.Client(host=s.url).embed(model=EMBED_MODEL, input="fits")
    finally:
        s.stop()
