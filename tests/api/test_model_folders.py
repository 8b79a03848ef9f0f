"""Hugging Face and MLX model folders served by `mlxr serve`: a folder given
with -m, and a sharded folder pulled into the registry from a local path
(the daemon runs with --allow-local-pulls)
(tests/fixtures/tiny-models, random-weight models; their outputs are checked
token for token against transformers and mlx-lm in the Rust tests)."""

import json

import ollama
import openai
import pytest
import requests

from conftest import ROOT, Server

TINY = ROOT / "tests/fixtures/tiny-models"


@pytest.fixture(scope="module")
def folder_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mlxr-folders"), "-m", str(TINY / "qwen3-mlx-q4-g128"), "--name", "tiny-mlx",
               "--allow-local-pulls")
    yield s
    s.stop()


def test_mlx_folder_given_with_m(folder_server):
    client = openai.OpenAI(base_url=folder_server.url + "/v1", api_key="none")
    ref = json.loads((TINY / "reference/qwen3-mlx-q4-g128.json").read_text())
    case = next(c for c in ref["cases"] if c["name"] == "short")
    r = client.completions.create(model="tiny-mlx", prompt=case["text"], max_tokens=4, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == len(case["ids"])
    assert r.usage.completion_tokens == 4
    r = client.chat.completions.create(model="tiny-mlx", messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert r.choices[0].finish_reason in ("stop", "length")

    shown = requests.post(folder_server.url + "/api/show", json={"model": "tiny-mlx"}).json()
    assert shown["details"]["family"] == "qwen3"
    assert shown["details"]["quantization_level"] == "MLX_Q4"
    assert shown["capabilities"] == ["completion"]
    assert "<|im_start|>" in shown["template"]
    assert shown["model_info"]["qwen3.hidden_size"] == 128


def test_sharded_folder_pulled_from_a_local_path(folder_server):
    client = ollama.Client(host=folder_server.url)
    statuses = [p.status for p in client.pull(str(TINY / "qwen2"), stream=True)]
    assert statuses[-1] == "success"
    model = next(m for m in client.list().models if m.model.startswith("qwen2"))
    assert model.details.family == "qwen2"
    assert model.details.format == "safetensors"
    assert model.details.quantization_level == "F16"
    r = client.generate(model=model.model, prompt="The quick brown fox", raw=True,
                        options={"num_predict": 3, "temperature": 0})
    assert r.done and r.eval_count >= 1

    # A folder whose index names a missing shard is refused, nothing registered.
    broken = folder_server.home.parent / "broken"
    broken.mkdir()
    for f in (TINY / "qwen2").iterdir():
        if f.name != "model-00002-of-00003.safetensors":
            (broken / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ollama.ResponseError) as e:
        list(client.pull(str(broken), stream=True))
    assert "model-00002-of-00003.safetensors" in str(e.value)
    assert not [m for m in client.list().models if m.model.startswith("broken")]
