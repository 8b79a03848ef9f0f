"""Bounded work per request: every bound answers 400 naming the field and the
limit (crates/mlxr-server/src/limits.rs), a value at the bound still works;
keep_alive values that cannot be durations are refused and /api/ps keeps
answering; user templates run within their fuel; fields without effect are
refused or warned about."""

import os
import subprocess
from datetime import datetime

import pytest
import requests

from conftest import EMBED_MODEL, MODEL, MODEL_FILE, ROOT, models_dir

# A request that hangs fails the test instead of blocking the run.
TIMEOUT = 120
VOCAB = 49152  # SmolLM2's vocabulary

MAX_TOKENS = 1 << 20
MAX_NUM_CTX = 1 << 20
MAX_STOP_STRINGS = 16
MAX_STOP_BYTES = 1024
MAX_LOGIT_BIAS_ENTRIES = 1024
MAX_MESSAGES = 4096
MAX_EMBED_INPUTS = 2048
MAX_EMBED_INPUT_BYTES = 8 << 20
MAX_PROMPT_TOKEN_IDS = 1 << 20
MAX_TEMPLATE_BYTES = 64 << 10


def post(server, path, body):
    return requests.post(server.url + path, json=body, timeout=TIMEOUT)


def completion(server, **kw):
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 2, "temperature": 0}
    return post(server, "/v1/completions", {**body, **kw})


def chat(server, **kw):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    return post(server, "/v1/chat/completions", {**body, **kw})


def generate(server, **kw):
    body = {"model": MODEL, "prompt": "Hi", "stream": False, "options": {"num_predict": 2}}
    return post(server, "/api/generate", {**body, **kw})


def ollama_chat(server, **kw):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": False,
            "options": {"num_predict": 2}}
    return post(server, "/api/chat", {**body, **kw})


def message(r):
    body = r.json()
    return body["error"]["message"] if isinstance(body["error"], dict) else body["error"]


def refused(r, *words):
    assert r.status_code == 400, (r.status_code, r.text)
    text = message(r)
    for w in words:
        assert str(w) in text, (w, text)
    return text


def ok(r):
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def test_completion_logprobs_capped_at_5(server):
    ok(completion(server, logprobs=5))
    refused(completion(server, logprobs=6), "logprobs", 5)


def test_chat_top_logprobs_capped_at_20(server):
    ok(chat(server, logprobs=True, top_logprobs=20))
    refused(chat(server, logprobs=True, top_logprobs=21), "top_logprobs", 20)
    ok(generate(server, logprobs=True, top_logprobs=20))
    refused(generate(server, logprobs=True, top_logprobs=21), "top_logprobs", 20)


def test_n_and_best_of_only_one(server):
    ok(completion(server, n=1, best_of=1))
    refused(completion(server, n=2), "n = 2")
    refused(completion(server, best_of=3), "best_of = 3")


def test_max_tokens_bounds(server):
    refused(completion(server, max_tokens=MAX_TOKENS + 1), "max_tokens", MAX_TOKENS)
    refused(chat(server, max_completion_tokens=MAX_TOKENS + 1), "max_completion_tokens", MAX_TOKENS)
    # Under the hard cap but past the context: OpenAI's context_length_exceeded.
    r = completion(server, max_tokens=MAX_TOKENS)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text


def test_num_predict_bounds(server):
    refused(generate(server, options={"num_predict": -3}), "num_predict", "-3")
    refused(generate(server, options={"num_predict": MAX_TOKENS + 1}), "num_predict", MAX_TOKENS)
    # -2 fills the context, here 48 tokens.
    out = ok(generate(server, options={"num_predict": -2, "num_ctx": 48, "temperature": 0}))
    assert out["prompt_eval_count"] + out["eval_count"] <= 48


def test_num_ctx_bounds_and_is_applied(server):
    refused(generate(server, options={"num_ctx": 0}), "num_ctx")
    refused(generate(server, options={"num_ctx": -5}), "num_ctx")
    refused(generate(server, options={"num_ctx": MAX_NUM_CTX + 1}), "num_ctx", MAX_NUM_CTX)
    ok(generate(server, options={"num_ctx": MAX_NUM_CTX, "num_predict": 2}))
    # The chat-templated prompt is longer than 8 tokens.
    refused(generate(server, options={"num_ctx": 8}), "context")


def test_stop_strings_bounds(server):
    many = [f"stop{i}" for i in range(MAX_STOP_STRINGS)]
    ok(completion(server, stop=many))
    refused(completion(server, stop=many + ["one more"]), "stop", MAX_STOP_STRINGS)
    ok(completion(server, stop=["x" * MAX_STOP_BYTES]))
    refused(completion(server, stop=["x" * (MAX_STOP_BYTES + 1)]), "stop", MAX_STOP_BYTES)
    ok(generate(server, options={"stop": many, "num_predict": 2}))
    refused(generate(server, options={"stop": many + ["x"]}), "stop", MAX_STOP_STRINGS)
    refused(generate(server, options={"stop": ["x" * (MAX_STOP_BYTES + 1)]}), "stop", MAX_STOP_BYTES)


def test_logit_bias_bounds(server):
    full = {str(i): 1 for i in range(MAX_LOGIT_BIAS_ENTRIES)}
    ok(completion(server, logit_bias=full))
    refused(completion(server, logit_bias={**full, "5000": 1}), "logit_bias", MAX_LOGIT_BIAS_ENTRIES)
    ok(completion(server, logit_bias={"1": 100, "2": -100}))
    refused(completion(server, logit_bias={"1": 100.5}), "logit_bias", "100")
    refused(completion(server, logit_bias={"1": -101}), "logit_bias", "100")


def test_out_of_vocabulary_logit_bias(server):
    ok(completion(server, logit_bias={str(VOCAB - 1): 5}))
    refused(completion(server, logit_bias={str(VOCAB): 5}), "logit_bias", VOCAB, "vocabulary")
    refused(chat(server, logit_bias={"4000000000": -100}), "logit_bias", "vocabulary")


def test_message_count(server):
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "Hi"} for i in range(MAX_MESSAGES + 1)]
    refused(chat(server, messages=turns), "messages", MAX_MESSAGES)
    refused(ollama_chat(server, messages=turns), "messages", MAX_MESSAGES)
    # At the cap the count passes; SmolLM2's context is what refuses it.
    r = chat(server, messages=turns[:MAX_MESSAGES])
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text


def test_embedding_inputs(server):
    out = ok(post(server, "/v1/embeddings", {"model": EMBED_MODEL, "input": ["a"] * MAX_EMBED_INPUTS}))
    assert len(out["data"]) == MAX_EMBED_INPUTS
    refused(post(server, "/v1/embeddings", {"model": EMBED_MODEL, "input": ["a"] * (MAX_EMBED_INPUTS + 1)}),
            "input", MAX_EMBED_INPUTS)
    refused(post(server, "/api/embed", {"model": EMBED_MODEL, "input": ["a"] * (MAX_EMBED_INPUTS + 1)}),
            "input", MAX_EMBED_INPUTS)
    big = ["x" * (MAX_EMBED_INPUT_BYTES // 4)] * 4 + ["y"]
    refused(post(server, "/api/embed", {"model": EMBED_MODEL, "input": big}), "input", MAX_EMBED_INPUT_BYTES)


def test_prompt_token_ids(server):
    refused(completion(server, prompt=[1] * (MAX_PROMPT_TOKEN_IDS + 1)), "prompt", MAX_PROMPT_TOKEN_IDS)
    refused(generate(server, context=[1] * (MAX_PROMPT_TOKEN_IDS + 1)), "context", MAX_PROMPT_TOKEN_IDS)
    ok(completion(server, prompt=[1, 2, 3]))
    refused(completion(server, prompt=[VOCAB]), "vocabulary")


BAD_KEEP_ALIVE = ["inf", "-inf", "NaN", 1e300, "9999999999999999h", "999999999999h", 1e13, "876001h"]


def ps_ok(server):
    r = requests.get(server.url + "/api/ps", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["models"]


def expiry_year(server):
    entry = next(m for m in ps_ok(server) if m["name"].startswith(MODEL))
    return datetime.fromisoformat(entry["expires_at"][:19]).year


@pytest.mark.parametrize("value", BAD_KEEP_ALIVE)
def test_bad_keep_alive_in_requests(server, value):
    refused(generate(server, prompt="", keep_alive=value), "keep_alive")
    refused(generate(server, keep_alive=value), "keep_alive")
    refused(post(server, "/api/embed", {"model": EMBED_MODEL, "input": "a", "keep_alive": value}), "keep_alive")
    ps_ok(server)


@pytest.mark.parametrize("value", BAD_KEEP_ALIVE)
def test_bad_keep_alive_in_config_patch(server, value):
    r = requests.patch(server.url + "/api/mlxr/config", json={"keep_alive": value}, timeout=TIMEOUT)
    refused(r, "keep_alive")
    ps_ok(server)


def test_keep_alive_edges(server):
    ok(generate(server, prompt="", keep_alive=-5))  # any negative: forever, as in Ollama
    assert expiry_year(server) > 2100
    ok(generate(server, prompt="", keep_alive="876000h"))  # the longest: 100 years
    assert expiry_year(server) > 2100
    ok(generate(server, prompt="", keep_alive="5m"))
    assert expiry_year(server) < 2100
    r = requests.patch(server.url + "/api/mlxr/config", json={"keep_alive": "876000h"}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["models"]["keep_alive"] == "876000h", r.text
    r = requests.patch(server.url + "/api/mlxr/config", json={"keep_alive": "5m"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text


def test_bad_keep_alive_flag_is_a_clear_error(tmp_path):
    binary = os.environ.get("MLXR_BIN", str(ROOT / "target/release/mlxr"))
    for value in ["inf", "9999999999999999h"]:
        out = subprocess.run([binary, "serve", "-m", str(models_dir() / MODEL_FILE), "--home", str(tmp_path),
                              "--host", "127.0.0.1:0", "--keep-alive", value],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0
        assert "--keep-alive" in out.stderr and "panicked" not in out.stderr, out.stderr


RUNAWAY = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"


def test_runaway_template_runs_out_of_fuel(server):
    refused(generate(server, template=RUNAWAY), "fuel")
    refused(ollama_chat(server, template=RUNAWAY), "fuel")
    # The server still serves.
    assert ok(chat(server))["choices"][0]["message"]["role"] == "assistant"
    assert ok(ollama_chat(server))["done"]


def padded_template(size):
    """A template of exactly `size` bytes that renders a short prompt."""
    head, tail = "{# ", " #}Say hi"
    return head + "x" * (size - len(head) - len(tail)) + tail


def test_template_size_limit(server):
    ok(generate(server, template=padded_template(MAX_TEMPLATE_BYTES)))
    refused(generate(server, template=padded_template(MAX_TEMPLATE_BYTES + 1)), "bytes", MAX_TEMPLATE_BYTES)


def test_per_request_template_is_applied(server):
    plain = "{% for m in messages %}{{ m.content }}{% endfor %}"
    default = ok(ollama_chat(server))["prompt_eval_count"]
    own = ok(ollama_chat(server, template=plain))["prompt_eval_count"]
    assert own < default, (own, default)
    default = ok(generate(server))["prompt_eval_count"]
    own = ok(generate(server, template=plain))["prompt_eval_count"]
    assert own < default, (own, default)


@pytest.mark.parametrize("field,value", [
    ("tool_choice", "required"),
    ("tool_choice", {"type": "function", "function": {"name": "f"}}),
    ("functions", [{"name": "f", "parameters": {}}]),
    ("function_call", {"name": "f"}),
])
def test_tool_fields_without_tools_are_refused(server, field, value):
    refused(chat(server, **{field: value}), field)


@pytest.mark.parametrize("field,value", [
    ("tool_choice", "none"), ("tool_choice", "auto"), ("function_call", "none"),
    ("parallel_tool_calls", True), ("parallel_tool_calls", False), ("functions", []),
])
def test_tool_fields_meaning_the_default_are_accepted(server, field, value):
    ok(chat(server, **{field: value}))


def test_no_op_ollama_options_are_warned_about(server):
    options = {"num_predict": 2, "mirostat": 2, "mirostat_eta": 0.1, "mirostat_tau": 5.0,
               "typical_p": 0.5, "tfs_z": 0.9, "num_keep": 4, "penalize_newline": True}
    ok(generate(server, options=options))
    warned = [line for line in server.read_log().splitlines() if "without effect" in line]
    assert warned, "no warning about options without effect"
    for name in ["mirostat", "mirostat_eta", "mirostat_tau", "typical_p", "tfs_z", "num_keep", "penalize_newline"]:
        assert name in warned[-1], (name, warned[-1])
