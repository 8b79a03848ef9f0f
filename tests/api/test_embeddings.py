"""Embeddings through both clients, checked against the transformers
reference vectors in tests/fixtures/embeddings/all-minilm.json."""

import base64
import json
import math
import struct

import ollama
import openai
import pytest

from conftest import EMBED_MODEL, MODEL, ROOT

FIXTURE = json.loads((ROOT / "tests/fixtures/embeddings/all-minilm.json").read_text())


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def short_cases():
    return [c for c in FIXTURE["cases"] if c["untruncated_tokens"] <= FIXTURE["max_seq_length"] and c["text"]]


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_openai_embeddings_match_the_reference(oai):
    cases = short_cases()
    r = oai.embeddings.create(model=EMBED_MODEL, input=[c["text"] for c in cases])
    assert [d.index for d in r.data] == list(range(len(cases)))
    for case, d in zip(cases, r.data):
        assert len(d.embedding) == FIXTURE["dimensions"]
        assert cosine(d.embedding, case["embedding"]) > 0.9999, case["text"]
    assert r.usage.prompt_tokens == sum(c["tokens"] for c in cases)


def test_openai_base64_and_dimensions(oai):
    floats = oai.embeddings.create(model=EMBED_MODEL, input="hello world").data[0].embedding
    raw = oai.embeddings.create(model=EMBED_MODEL, input="hello world", encoding_format="base64")
    packed = base64.b64decode(raw.data[0].embedding)
    decoded = struct.unpack(f"<{len(packed) // 4}f", packed)
    assert list(decoded) == pytest.approx(floats, abs=1e-7)
    short = oai.embeddings.create(model=EMBED_MODEL, input="hello world", dimensions=64).data[0].embedding
    assert len(short) == 64
    assert math.isclose(sum(x * x for x in short), 1.0, rel_tol=1e-5)


def test_ollama_embed_and_legacy_embeddings(server):
    client = ollama.Client(host=server.url)
    cases = short_cases()[:3]
    r = client.embed(model=EMBED_MODEL, input=[c["text"] for c in cases])
    for case, v in zip(cases, r.embeddings):
        assert cosine(v, case["embedding"]) > 0.9999
    assert r.prompt_eval_count == sum(c["tokens"] for c in cases)
    legacy = client.embeddings(model=EMBED_MODEL, prompt=cases[0]["text"])
    assert cosine(legacy.embedding, cases[0]["embedding"]) > 0.9999
    similar = client.embed(model=EMBED_MODEL, input=["A cat sits on the mat.", "A kitten is sitting on a rug.", "Stock markets fell sharply today."]).embeddings
    assert cosine(similar[0], similar[1]) > cosine(similar[0], similar[2])


def test_long_input_truncates_on_ollama_and_is_refused_on_openai(server, oai):
    long = next(c for c in FIXTURE["cases"] if c["untruncated_tokens"] > FIXTURE["max_seq_length"])
    r = ollama.Client(host=server.url).embed(model=EMBED_MODEL, input=long["text"])
    assert cosine(r.embeddings[0], long["embedding"]) > 0.9999
    with pytest.raises(openai.BadRequestError):
        oai.embeddings.create(model=EMBED_MODEL, input=long["text"])


def test_wrong_model_kind_is_a_400(server, oai):
    with pytest.raises(openai.BadRequestError):
        oai.embeddings.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(model=EMBED_MODEL, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ollama.ResponseError) as e:
        ollama.Client(host=server.url).generate(model=EMBED_MODEL, prompt="hi")
    assert e.value.status_code == 400
    shown = ollama.Client(host=server.url).show(EMBED_MODEL)
    assert "embedding" in shown.capabilities
