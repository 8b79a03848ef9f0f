"""The Python SDK (sdks/python, `import mlxr`) against a real `mlxr serve`:
every method, streams equal to whole replies, progress of a pull, errors
with the daemon's message, the API key, the Unix socket, AsyncClient."""

import asyncio
import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import mlxr
import pytest

from conftest import EMBED_MODEL, MODEL, MODEL_FILE, QWEN, Server, models_dir

HI = [{"role": "user", "content": "Name three colours."}]
GREEDY = {"temperature": 0, "seed": 7, "num_predict": 24}


class ModelFiles:
    """The models folder over plain http (a pull source that needs no network)."""

    def __init__(self):
        class Quiet(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(Quiet, directory=str(models_dir()))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon with a Unix socket that may pull from http:// (ModelFiles)."""
    tmp = tmp_path_factory.mktemp("mlxr-sdk")
    s = Server(tmp, "--allow-insecure-pulls", "--socket", str(tmp / "mlxr.sock"))
    s.socket = tmp / "mlxr.sock"
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(daemon):
    with mlxr.Client(daemon.url) as c:
        yield c


@pytest.fixture(scope="module")
def files():
    f = ModelFiles()
    yield f
    f.close()


def test_version(client):
    assert client.version()


def test_chat_stream_equals_the_whole_reply(client):
    whole = client.chat(MODEL, HI, **GREEDY)
    assert isinstance(whole, mlxr.ChatResponse) and whole.done
    assert whole.message.role == "assistant" and whole.message.content
    assert whole.eval_count == 24 and whole.done_reason == "length"
    parts = list(client.chat(MODEL, HI, stream=True, **GREEDY))
    assert len(parts) > 2 and parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].eval_count == whole.eval_count
    # The ollama package's dict-style reads work too.
    assert whole["message"]["content"] == whole.message.content


def test_leaving_a_stream_early_closes_it(client):
    stream = client.generate(MODEL, "Count to 100:", stream=True, temperature=0, num_predict=500)
    for n, part in enumerate(stream):
        assert not part.done
        if n == 2:
            break
    stream.close()
    assert client.generate(MODEL, "Hi", num_predict=2).eval_count == 2


def test_options_as_a_dict_or_keywords_are_the_same(client):
    a = client.chat(MODEL, HI, options=GREEDY)
    b = client.chat(MODEL, HI, **GREEDY)
    assert a.message.content == b.message.content


def test_structured_output(client):
    schema = {"type": "object", "properties": {"colour": {"type": "string", "maxLength": 12}},
              "required": ["colour"], "additionalProperties": False}
    r = client.chat(MODEL, HI, format=schema, **GREEDY | {"num_predict": 64})
    assert list(json.loads(r.message.content)) == ["colour"]


def test_tool_calls_are_typed(qwen):
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    r = mlxr.Client(qwen.url).chat(QWEN, [{"role": "user", "content": "What is the weather in Paris?"}],
                                   tools=[weather], temperature=0, num_predict=64)
    [call] = r.message.tool_calls
    assert isinstance(call, mlxr.ToolCall) and call.function.name == "get_weather"
    assert call.function.arguments == {"city": "Paris"}
    # The reply goes back into the conversation as it came.
    follow = mlxr.Client(qwen.url).chat(QWEN, [{"role": "user", "content": "What is the weather in Paris?"}, r.message,
                                               {"role": "tool", "tool_name": "get_weather", "content": "sunny, 21 C"}],
                                        tools=[weather], temperature=0, num_predict=16)
    assert follow.done


def test_generate(client):
    whole = client.generate(MODEL, "The capital of France is", **GREEDY)
    assert isinstance(whole, mlxr.GenerateResponse) and whole.response and whole.context
    streamed = "".join(p.response for p in client.generate(MODEL, "The capital of France is", stream=True, **GREEDY))
    assert streamed == whole.response
    raw = client.generate(MODEL, "1, 2, 3,", raw=True, **GREEDY)
    assert raw.response and raw.prompt_eval_count < whole.prompt_eval_count


def test_embed(client):
    r = client.embed(EMBED_MODEL, ["a cat sits on the mat", "a kitten sits on the rug", "tax law"])
    assert isinstance(r, mlxr.EmbedResponse) and len(r.embeddings) == 3
    assert len(r.embeddings[0]) == 384
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))
    assert dot(r.embeddings[0], r.embeddings[1]) > dot(r.embeddings[0], r.embeddings[2])
    assert len(client.embed(EMBED_MODEL, "one text").embeddings) == 1
    assert len(client.embed(EMBED_MODEL, "one text", dimensions=64).embeddings[0]) == 64


def test_list_show_ps(client):
    names = [m.model for m in client.list().models]
    assert f"{MODEL}:latest" in names and f"{EMBED_MODEL}:latest" in names
    smol = next(m for m in client.list().models if m.model == f"{MODEL}:latest")
    assert smol.details.format == "gguf" and smol.details.quantization_level == "Q4_1" and smol.size > 0
    shown = client.show(MODEL)
    assert shown.details.family == "llama" and "im_start" in shown.template and shown.model_info
    client.generate(MODEL, "Hi", num_predict=1)
    running = {m.model: m for m in client.ps().models}
    assert f"{MODEL}:latest" in running
    assert running[f"{MODEL}:latest"].context_length > 0 and running[f"{MODEL}:latest"].expires_at


def test_pull_reports_progress_then_create_copy_delete(client, files):
    seen = []
    last = client.pull(f"{files.url}/{MODEL_FILE}", progress=seen.append)
    assert last.status == "success" and seen[-1] is last
    sizes = [p for p in seen if p.total]
    total = (models_dir() / MODEL_FILE).stat().st_size
    assert sizes and all(p.total == total for p in sizes)
    assert sizes[-1].completed == total
    assert [p.completed for p in sizes] == sorted(p.completed for p in sizes)
    pulled = "smollm2-135m-instruct.q4_1:latest"
    assert pulled in [m.model for m in client.list().models]

    steps = []
    created = client.create("sdk-pirate", from_=pulled, system="You are a pirate.",
                            parameters={"temperature": 0, "num_predict": 8}, progress=steps.append)
    assert created.status == "success" and steps[-1] is created
    shown = client.show("sdk-pirate")
    assert shown.system == "You are a pirate." and "num_predict" in shown.parameters
    assert client.chat("sdk-pirate", HI).eval_count == 8  # the created model's parameter

    client.copy("sdk-pirate", "sdk-pirate-2")
    assert client.show("sdk-pirate-2").system == "You are a pirate."
    client.delete("sdk-pirate-2")
    with pytest.raises(mlxr.ResponseError) as e:
        client.show("sdk-pirate-2")
    assert e.value.status_code == 404
    client.delete("sdk-pirate")
    assert "sdk-pirate:latest" not in [m.model for m in client.list().models]


def test_errors_carry_the_daemons_message(client, files):
    with pytest.raises(mlxr.ResponseError) as e:
        client.chat("no-such-model", HI)
    assert e.value.status_code == 404 and e.value.message == "model 'no-such-model' not found"
    with pytest.raises(mlxr.ResponseError) as e:
        list(client.generate(MODEL, "Hi", stream=True, num_predict=-5))
    assert e.value.status_code == 400 and "num_predict" in e.value.message
    with pytest.raises(mlxr.ResponseError) as e:
        client.delete("no-such-model")
    assert e.value.status_code == 404 and "no-such-model" in e.value.message
    # A download that fails after the stream started: an in-band error line.
    seen = []
    with pytest.raises(mlxr.ResponseError) as e:
        client.pull(f"{files.url}/missing.gguf", progress=seen.append)
    assert e.value.status_code == -1 and "404" in e.value.message and seen


def test_no_daemon_is_a_connection_error(tmp_path):
    with pytest.raises(ConnectionError, match="could not connect to mlxr serve"):
        mlxr.Client(f"unix:{tmp_path}/none.sock").version()


def test_api_key(keyed_server):
    with pytest.raises(mlxr.ResponseError) as e:
        mlxr.Client(keyed_server.url).list()
    assert e.value.status_code == 401
    with pytest.raises(mlxr.ResponseError) as e:
        mlxr.Client(keyed_server.url, api_key="wrong").list()
    assert e.value.status_code == 401 and e.value.message
    keyed = mlxr.Client(keyed_server.url, api_key="sekrit")
    assert MODEL + ":latest" in [m.model for m in keyed.list().models]
    assert keyed.chat(MODEL, HI, num_predict=2).eval_count == 2


def test_host_from_the_environment_and_the_unix_socket(daemon, monkeypatch):
    monkeypatch.setenv("MLXR_HOST", f"unix:{daemon.socket}")
    over_socket = mlxr.Client()
    assert over_socket.version()
    reply = over_socket.chat(MODEL, HI, **GREEDY)
    assert reply.message.content == mlxr.Client(daemon.url).chat(MODEL, HI, **GREEDY).message.content
    monkeypatch.setenv("MLXR_HOST", daemon.url.removeprefix("http://"))
    assert mlxr.Client().version()


def test_async_client(daemon):
    async def main():
        async with mlxr.AsyncClient(f"unix:{daemon.socket}") as client:
            whole = await client.chat(MODEL, HI, **GREEDY)
            parts = [p async for p in await client.chat(MODEL, HI, stream=True, **GREEDY)]
            assert "".join(p.message.content for p in parts) == whole.message.content
            # Two streams at once (the daemon batches them).
            gen = [client.generate(MODEL, "Count:", stream=True, **GREEDY) for _ in range(2)]
            texts = []
            for stream in await asyncio.gather(*gen):
                texts.append("".join([p.response async for p in stream]))
            assert texts[0] == texts[1] and texts[0]
            assert len((await client.embed(EMBED_MODEL, ["x", "y"])).embeddings) == 2
            assert MODEL + ":latest" in [m.model for m in (await client.list()).models]
            with pytest.raises(mlxr.ResponseError) as e:
                await client.show("no-such-model")
            assert e.value.status_code == 404

    asyncio.run(main())
