"""Speculative decoding (prompt lookup) through the official clients: the
per-request `speculative.*` keys in OpenAI bodies and Ollama options, and as
a model's parameters (/api/create); greedy text equals the text without, the
draft counts come back in `timings` and the final Ollama response, and
`/metrics` counts them. Bad values are a 400."""

import hashlib

import ollama
import openai
import pytest
import requests

from conftest import EMBED_MODEL, MODEL, MODEL_FILE, models_dir

PROMPT = "Repeat this list exactly, twice: apple, banana, cherry, date, elderberry, fig, grape."
# "max": always n_max draft tokens where a match allows, so that drafts are
# counted whatever the timings (the default, "goodput", drafts as the measured
# step costs say; its text is checked too).
SPEC = {"speculative.type": "ngram", "speculative.n_max": 6, "speculative.draft_length": "max"}


@pytest.fixture
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def chat(oai, stream=False, **extra):
    return oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=60,
        temperature=0, stream=stream, extra_body=extra or None)


def create(server, name, parameters):
    """/api/create of SmolLM2's file (uploaded as a blob) under `name`."""
    path = models_dir() / MODEL_FILE
    digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    with open(path, "rb") as f:
        requests.post(f"{server.url}/api/blobs/{digest}", data=f, timeout=60).raise_for_status()
    return requests.post(server.url + "/api/create", json={
        "model": name, "files": {MODEL_FILE: digest}, "stream": False, "parameters": parameters},
        timeout=60)


def spec_counter(server, name):
    text = requests.get(server.url + "/metrics", timeout=10).text
    lines = [l for l in text.splitlines() if l.startswith((f"mlxr:{name}_total{{", f"mlxr:{name}_total "))]
    assert lines, text
    return sum(float(l.rsplit(" ", 1)[1]) for l in lines)


def test_openai_lookup_gives_the_same_text_and_reports_drafts(server, oai):
    plain = chat(oai, **{"speculative.type": "none"})
    before = spec_counter(server, "spec_decode_num_accepted_tokens")
    spec = chat(oai, **SPEC)
    assert spec.choices[0].message.content == plain.choices[0].message.content
    t = spec.model_extra["timings"]
    assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"], t
    assert plain.model_extra["timings"]["draft_n"] == 0
    assert spec_counter(server, "spec_decode_num_accepted_tokens") >= before + t["draft_n_accepted"]
    goodput = chat(oai, **{"speculative.type": "ngram"})
    assert goodput.choices[0].message.content == plain.choices[0].message.content

    # Streaming: the same text, the counts in the last chunk with choices.
    chunks = list(chat(oai, stream=True, **SPEC))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    last = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert last.model_extra["timings"]["draft_n_accepted"] == t["draft_n_accepted"]


@pytest.mark.parametrize("bad", [
    {"speculative.n_max": 99},
    {"speculative.type": "eagle"},
    {"speculative.type": "draft"},
    {"speculative.n_min": 5, "speculative.n_max": 2},
    {"speculative.p_min": 2.0},
    {"speculative.draft_length": "most"},
])
def test_bad_speculative_values_are_400(oai, bad):
    with pytest.raises(openai.BadRequestError) as e:
        chat(oai, **bad)
    assert "specul" in str(e.value), e.value


def test_speculation_on_an_embedding_model_is_a_clear_error(oai):
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(
            model=EMBED_MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
            extra_body=SPEC)
    assert "embedding model" in str(e.value), e.value


def test_ollama_options_and_model_parameters(server):
    client = ollama.Client(host=server.url)
    opts = {"num_predict": 60, "temperature": 0}
    plain = client.generate(model=MODEL, prompt=PROMPT, options=opts)
    spec = client.generate(model=MODEL, prompt=PROMPT, options={**opts, **SPEC})
    assert spec.response == plain.response
    # The client drops fields it does not know: the counts, read raw.
    final = requests.post(server.url + "/api/generate", json={
        "model": MODEL, "prompt": PROMPT, "stream": False, "options": {**opts, **SPEC}}, timeout=60).json()
    assert final["response"] == plain.response
    assert 0 < final["draft_n_accepted"] <= final["draft_n"], final

    # As a model's parameters: every request to it speculates.
    r = create(server, "smollm2-lookup", {"speculative.type": "ngram", "speculative.n_max": 4})
    assert r.ok, r.text
    r = requests.post(server.url + "/api/generate", json={
        "model": "smollm2-lookup", "prompt": PROMPT, "stream": False, "options": opts}, timeout=60)
    assert r.ok, r.text
    body = r.json()
    assert body["response"] == plain.response
    assert body["draft_n"] > 0, body

    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model=MODEL, prompt=PROMPT, options={**opts, "speculative.n_max": -1})
    assert e.value.status_code == 400


def test_a_model_parameter_names_its_draft_model(server):
    """`speculative.model_draft` as a model parameter: the draft loads with
    the model and its requests draft by default (here SmolLM2 drafting for
    itself: every draft stands, the text is the same). A draft that does not
    exist is a 400 at create; a request cannot name one."""
    opts = {"num_predict": 24, "temperature": 0}
    plain = requests.post(server.url + "/api/generate", json={
        "model": MODEL, "prompt": PROMPT, "stream": False, "options": opts}, timeout=60).json()
    r = create(server, "smollm2-drafted",
               {"speculative.model_draft": MODEL, "speculative.draft_length": "max"})
    assert r.ok, r.text
    body = requests.post(server.url + "/api/generate", json={
        "model": "smollm2-drafted", "prompt": PROMPT, "stream": False, "options": opts},
        timeout=60).json()
    assert body["response"] == plain["response"], body
    assert body["draft_n"] > 0 and body["draft_n_accepted"] == body["draft_n"], body
    show = requests.post(server.url + "/api/show", json={"model": "smollm2-drafted"}, timeout=10).json()
    assert "speculative.model_draft" in show["parameters"], show

    r = create(server, "smollm2-bad-draft", {"speculative.model_draft": "no-such-draft"})
    assert r.status_code == 400 and "no-such-draft" in r.text, r.text
    r = requests.post(server.url + "/api/generate", json={
        "model": MODEL, "prompt": PROMPT, "stream": False,
        "options": {**opts, "speculative.model_draft": MODEL}}, timeout=60)
    assert r.status_code == 400 and "not a request option" in r.text, r.text
