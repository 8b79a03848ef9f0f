"""The official `ollama` Python client against `mlxr serve`."""

import ollama
import pytest

from conftest import MODEL


@pytest.fixture
def client(server):
    return ollama.Client(host=server.url)


def test_generate(client):
    r = client.generate(model=MODEL, prompt="Why is the sky blue?", options={"num_predict": 12, "temperature": 0})
    assert r.done and r.done_reason in ("stop", "length")
    assert r.response.strip()
    assert r.eval_count <= 12 and r.prompt_eval_count > 0
    assert r.total_duration > 0 and r.eval_duration > 0
    assert r.context and len(r.context) > r.eval_count


def test_generate_stream_equals_non_stream(client):
    opts = {"num_predict": 12, "temperature": 0}
    full = client.generate(model=MODEL, prompt="List two fruits.", options=opts)
    parts = list(client.generate(model=MODEL, prompt="List two fruits.", options=opts, stream=True))
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.response for p in parts) == full.response


def test_raw_generate(client):
    r = client.generate(model=MODEL, prompt="The capital of France is", raw=True,
                        options={"num_predict": 4, "temperature": 0})
    assert "Paris" in r.response


def test_chat(client):
    msgs = [{"role": "user", "content": "Say hello."}]
    r = client.chat(model=MODEL, messages=msgs, options={"num_predict": 10, "temperature": 0})
    assert r.message.role == "assistant" and r.message.content.strip()
    parts = list(client.chat(model=MODEL, messages=msgs, options={"num_predict": 10, "temperature": 0}, stream=True))
    assert "".join(p.message.content for p in parts) == r.message.content


def test_seed_and_stop(client):
    opts = {"num_predict": 16, "temperature": 1.0, "seed": 7}
    a = client.generate(model=MODEL, prompt="Tell me a joke.", options=opts)
    b = client.generate(model=MODEL, prompt="Tell me a joke.", options=opts)
    assert a.response == b.response
    c = client.generate(model=MODEL, prompt="Count from 1 to 9 with commas.", options={"num_predict": 30, "temperature": 0, "stop": ["5"]})
    assert "5" not in c.response and c.done_reason == "stop"


def test_list_show_ps_version(client):
    names = [m.model for m in client.list().models]
    assert "smollm2:latest" in names
    shown = client.show(MODEL)
    assert shown.modelinfo["general.architecture"] == "llama"
    assert shown.details.quantization_level == "Q4_1"
    assert shown.template
    client.generate(model=MODEL, prompt="hi", options={"num_predict": 1})
    loaded = [m.model for m in client.ps().models]
    assert "smollm2:latest" in loaded


def test_load_and_unload_with_empty_prompt(client):
    r = client.generate(model=MODEL, prompt="")
    assert r.done_reason == "load"
    r = client.generate(model=MODEL, prompt="", keep_alive=0)
    assert r.done_reason == "unload"
    assert "smollm2:latest" not in [m.model for m in client.ps().models]


def test_errors_raise_response_error(client):
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model="no-such-model", prompt="hi")
    assert e.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model=MODEL, prompt="hi", options={"temperature": "hot"})
    assert e.value.status_code == 400
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model=MODEL, prompt="hi", format={"type": "no-such-type"})
    assert e.value.status_code == 400
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model=MODEL, prompt="word " * 9000)
    assert e.value.status_code == 400


def test_per_request_template_is_a_jinja_chat_template(client):
    template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\nThe answer is:"
    opts = {"num_predict": 6, "temperature": 0}
    r = client.generate(model=MODEL, prompt="What is 2+2?", template=template, options=opts)
    rendered = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nThe answer is:"
    raw = client.generate(model=MODEL, prompt=rendered, raw=True, options=opts)
    assert r.response == raw.response
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model=MODEL, prompt="hi", template="{% if %}")
    assert e.value.status_code == 400
