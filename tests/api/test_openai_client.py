"""The official `openai` Python client against `mlxr serve`."""

import concurrent.futures

import openai
import pytest

from conftest import MODEL


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def chat(client, text, **kw):
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}], **kw
    )


def test_models(client):
    ids = [m.id for m in client.models.list()]
    assert "smollm2:latest" in ids
    assert client.models.retrieve(MODEL).id == "smollm2:latest"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_chat_completion(client):
    r = chat(client, "What is the capital of France?", max_tokens=16, temperature=0)
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 5
    assert r.usage.completion_tokens <= 16
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_streaming_matches_non_streaming(client):
    full = chat(client, "Name three colours.", max_tokens=20, temperature=0)
    stream = chat(client, "Name three colours.", max_tokens=20, temperature=0, stream=True,
                  stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == full.choices[0].message.content
    assert finishes == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_cached_prompt_tokens_are_reported(client):
    system = "You are a careful assistant. " * 20
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Say hi."}]
    client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=2, temperature=0)
    msgs[1]["content"] = "Say bye."
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=2, temperature=0)
    assert r.usage.prompt_tokens_details.cached_tokens >= 96


def test_logprobs(client):
    r = chat(client, "Count: 1, 2, 3,", max_tokens=4, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for item in content:
        assert item.logprob <= 0
        assert len(item.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert item.logprob == pytest.approx(item.top_logprobs[0].logprob, abs=1e-5)


def test_stop_string_is_not_emitted(client):
    free = chat(client, "Count from 1 to 10 separated by commas.", max_tokens=30, temperature=0)
    text = free.choices[0].message.content
    assert "4" in text
    stopped = chat(client, "Count from 1 to 10 separated by commas.", max_tokens=30, temperature=0, stop=["4"])
    assert stopped.choices[0].finish_reason == "stop"
    assert "4" not in stopped.choices[0].message.content
    assert text.startswith(stopped.choices[0].message.content)


def test_seed_reproducible(client):
    a = chat(client, "Tell me a story.", max_tokens=24, temperature=1.0, seed=1234)
    b = chat(client, "Tell me a story.", max_tokens=24, temperature=1.0, seed=1234)
    assert a.choices[0].message.content == b.choices[0].message.content


def test_completions_text_and_token_ids(client):
    a = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6,
                                  temperature=0, logprobs=2)
    assert a.object == "text_completion"
    assert a.choices[0].text
    assert len(a.choices[0].logprobs.tokens) == a.usage.completion_tokens
    assert all(len(t) == 2 for t in a.choices[0].logprobs.top_logprobs)
    ids = [504, 3575, 282, 4649, 314]  # "The capital of France is" in SmolLM2's vocabulary
    b = client.completions.create(model=MODEL, prompt=ids, max_tokens=6, temperature=0)
    assert b.usage.prompt_tokens == len(ids)
    assert b.choices[0].text == a.choices[0].text


def test_errors_are_client_exceptions(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="missing", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "word " * 9000, max_tokens=4)
    assert "context" in str(e.value) or "tokens" in str(e.value)
    with pytest.raises(openai.BadRequestError):
        chat(client, "hi", n=2)
    with pytest.raises(openai.BadRequestError):
        chat(client, "hi", temperature=-3)


def test_eight_concurrent_streams(client):
    prompts = [f"Write one sentence about the number {i}." for i in range(8)]

    def run(p):
        s = chat(client, p, max_tokens=16, temperature=0, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in s if c.choices)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(run, prompts))
    assert all(t.strip() for t in together)
    # Batched with seven others, greedy output equals the request alone.
    assert together[3] == run(prompts[3])


def test_api_key(keyed_server):
    bad = openai.OpenAI(base_url=keyed_server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    good = openai.OpenAI(base_url=keyed_server.url + "/v1", api_key="sekrit", max_retries=0)
    assert good.models.list().data
