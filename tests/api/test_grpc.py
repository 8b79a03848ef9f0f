"""The gRPC API (`proto/mlxr/v1/inference.proto`) from Python's grpcio against
a real `mlxr serve`, on the same port as REST and on the Unix socket.
Generation streams
what REST answers for the same request; cancelling a call frees its request
(`/metrics`); tools, structured output, embeddings, tokenizer and model
calls; show, pull (progress) and delete; errors as status codes; the API
key; health and reflection. The stubs are the Python SDK's (`mlxr.v1`).
"""

import functools
import json
import math
import re
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import grpc
import jsonschema
import pytest
import requests
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from conftest import EMBED_MODEL, MODEL, MODEL_FILE, QWEN, Server, free_port, models_dir


@pytest.fixture(scope="session")
def pb():
    """The `mlxr.v1` stubs the Python SDK ships, generated from proto/
    (test_sdk_grpc.py checks that they are current)."""
    from mlxr.v1 import inference_pb2, inference_pb2_grpc
    return inference_pb2, inference_pb2_grpc


def channel(server):
    return grpc.insecure_channel(f"127.0.0.1:{server.port}")


@pytest.fixture
def stub(server, pb):
    with channel(server) as ch:
        yield pb[1].InferenceStub(ch)


def run(stream):
    """A reply's text, token ids, tool calls and Done message."""
    text, ids, calls, done = "", [], [], None
    for m in stream:
        kind = m.WhichOneof("event")
        if kind == "token":
            text += m.token.text
            ids.append(m.token.id)
        elif kind == "text":
            text += m.text
        elif kind == "tool_call":
            calls.append(m.tool_call)
        else:
            assert done is None
            done = m.done
    assert done is not None, "the stream ended without Done"
    return text, ids, calls, done


def test_generate_streams_what_rest_answers(stub, server, pb):
    inference_pb2, _ = pb
    opts = inference_pb2.Options(temperature=0, num_predict=24, seed=7)
    text, ids, _, done = run(stub.Generate(inference_pb2.GenerateRequest(
        model=MODEL, prompt="Name three colors.", options=opts)))
    rest = requests.post(server.url + "/api/generate", json={
        "model": MODEL, "prompt": "Name three colors.", "stream": False,
        "options": {"temperature": 0, "num_predict": 24, "seed": 7}}, timeout=120).json()
    assert text == rest["response"] and text
    assert ids == rest["context"][-len(ids):]
    assert done.usage.completion_tokens == rest["eval_count"] == len(ids)
    assert done.usage.prompt_tokens > 0
    assert done.finish_reason == inference_pb2.FINISH_REASON_LENGTH
    assert done.timings.predicted_n == len(ids)


def test_sampled_generation_is_the_same_for_a_seed(stub, server, pb):
    inference_pb2, _ = pb
    opts = inference_pb2.Options(temperature=1.0, top_k=40, num_predict=16, seed=1234)
    first = run(stub.Generate(inference_pb2.GenerateRequest(model=MODEL, prompt="Once upon a time", options=opts)))
    again = run(stub.Generate(inference_pb2.GenerateRequest(model=MODEL, prompt="Once upon a time", options=opts)))
    assert first[1] == again[1]
    rest = requests.post(server.url + "/api/generate", json={
        "model": MODEL, "prompt": "Once upon a time", "stream": False,
        "options": {"temperature": 1.0, "top_k": 40, "num_predict": 16, "seed": 1234}}, timeout=120).json()
    assert first[0] == rest["response"]


def test_chat_with_logprobs_and_stop(stub, pb):
    inference_pb2, _ = pb
    req = inference_pb2.ChatRequest(
        model=MODEL, messages=[inference_pb2.Message(role="user", content="Count from 1 to 10.")],
        options=inference_pb2.Options(temperature=0, num_predict=40, stop=["5"]),
        logprobs=True, top_logprobs=2)
    tokens, done = [], None
    for m in stub.Chat(req):
        if m.WhichOneof("event") == "token":
            tokens.append(m.token)
        elif m.WhichOneof("event") == "done":
            done = m.done
    assert done.finish_reason == inference_pb2.FINISH_REASON_STOP
    text = "".join(t.text for t in tokens)
    assert "5" not in text and "4" in text, text
    for t in tokens:
        assert t.HasField("logprob") and t.logprob.logprob <= 0
        assert len(t.top_logprobs) == 2
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob


def long_reply(pb):
    """A format the model cannot end before ~2,000 tokens (the model may
    stop early by itself otherwise)."""
    return pb[0].Format(regex="([0-9]+\n){1000}")


def running_requests(server) -> float:
    text = requests.get(server.url + "/metrics").text
    values = re.findall(r'^mlxr:num_requests_running\{model="[^"]+"\} (\S+)$', text, re.M)
    return sum(float(v) for v in values)


def test_cancelling_the_call_frees_the_request(stub, server, pb):
    inference_pb2, _ = pb
    long = long_reply(pb)
    call = stub.Generate(inference_pb2.GenerateRequest(
        model=MODEL, prompt="Count to a thousand:", format=long,
        options=inference_pb2.Options(temperature=0, num_predict=2000)))
    for i, _ in enumerate(call):
        if i == 5:
            break
    assert running_requests(server) == 1
    call.cancel()
    deadline = time.time() + 10
    while running_requests(server) != 0:
        assert time.time() < deadline, "the cancelled request is still running"
        time.sleep(0.05)
    with pytest.raises(grpc.RpcError) as e:
        next(call)
    assert e.value.code() == grpc.StatusCode.CANCELLED


def test_a_deadline_ends_the_request(stub, server, pb):
    inference_pb2, _ = pb
    long = long_reply(pb)
    call = stub.Generate(inference_pb2.GenerateRequest(
        model=MODEL, prompt="Count to a thousand:", format=long,
        options=inference_pb2.Options(temperature=0, num_predict=2000)), timeout=1.0)
    with pytest.raises(grpc.RpcError) as e:
        for _ in call:
            pass
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    deadline = time.time() + 10
    while running_requests(server) != 0:
        assert time.time() < deadline, "the request is still running after its deadline"
        time.sleep(0.05)


PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20},
    "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "age"], "additionalProperties": False}


def test_structured_output(stub, pb):
    inference_pb2, _ = pb
    fmt = inference_pb2.Format(json_schema=json.dumps(PERSON))
    text, _, _, done = run(stub.Generate(inference_pb2.GenerateRequest(
        model=MODEL, prompt="Describe a person as JSON.", format=fmt,
        options=inference_pb2.Options(temperature=0, num_predict=100))))
    jsonschema.validate(json.loads(text), PERSON)
    assert done.finish_reason == inference_pb2.FINISH_REASON_STOP
    text, _, _, _ = run(stub.Generate(inference_pb2.GenerateRequest(
        model=MODEL, prompt="Say hello.", format=inference_pb2.Format(regex="(Hello|Hi), [A-Z][a-z]+!"),
        options=inference_pb2.Options(temperature=0, num_predict=30))))
    assert re.fullmatch("(Hello|Hi), [A-Z][a-z]+!", text), text


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_chat_tool_call_and_answer(qwen, pb):
    inference_pb2, inference_pb2_grpc = pb
    tool = inference_pb2.Tool(name="get_weather", description="Get the current weather in a city",
                              parameters_json=json.dumps(WEATHER))
    ask = inference_pb2.Message(role="user", content="What is the weather like in Paris today?")
    opts = inference_pb2.Options(temperature=0, num_predict=100)
    with channel(qwen) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        for choice in ("auto", "required", "get_weather"):
            text, _, calls, done = run(stub.Chat(inference_pb2.ChatRequest(
                model=QWEN, messages=[ask], tools=[tool], tool_choice=choice,
                parallel_tool_calls=False, options=opts)))
            assert done.finish_reason == inference_pb2.FINISH_REASON_TOOL_CALLS, (choice, text)
            assert len(calls) == 1 and calls[0].name == "get_weather"
            jsonschema.validate(json.loads(calls[0].arguments_json), WEATHER)
            assert "<tool_call>" not in text
        call = calls[0]
        answer = [ask,
                  inference_pb2.Message(role="assistant", tool_calls=[call]),
                  inference_pb2.Message(role="tool", tool_call_id=call.id, content='{"temperature_c": 31, "sky": "sunny"}')]
        text, _, calls, done = run(stub.Chat(inference_pb2.ChatRequest(
            model=QWEN, messages=answer, tools=[tool], tool_choice="none", options=opts)))
        assert not calls and done.finish_reason == inference_pb2.FINISH_REASON_STOP
        assert "31" in text, text


def test_embed_equals_rest(stub, server, pb):
    inference_pb2, _ = pb
    texts = ["The cat sits on the mat.", "A stock market report."]
    r = stub.Embed(inference_pb2.EmbedRequest(model=EMBED_MODEL, input=texts))
    rest = requests.post(server.url + "/api/embed", json={"model": EMBED_MODEL, "input": texts}, timeout=60).json()
    assert len(r.embeddings) == 2 and r.prompt_tokens == rest["prompt_eval_count"]
    for got, want in zip(r.embeddings, rest["embeddings"]):
        assert math.isclose(sum(v * v for v in got.values), 1.0, rel_tol=1e-5)
        assert max(abs(a - b) for a, b in zip(got.values, want)) < 1e-6
    short = stub.Embed(inference_pb2.EmbedRequest(model=EMBED_MODEL, input=texts[:1], dimensions=64))
    assert len(short.embeddings[0].values) == 64


def test_tokenize_and_detokenize(stub, pb):
    inference_pb2, _ = pb
    ids = stub.Tokenize(inference_pb2.TokenizeRequest(model=MODEL, text="Hello, world!")).ids
    assert len(ids) > 1
    special = stub.Tokenize(inference_pb2.TokenizeRequest(model=MODEL, text="<|im_start|>", parse_special=True)).ids
    assert len(special) == 1
    text = stub.Detokenize(inference_pb2.DetokenizeRequest(model=MODEL, ids=ids)).text
    assert text == "Hello, world!"
    with pytest.raises(grpc.RpcError) as e:
        stub.Detokenize(inference_pb2.DetokenizeRequest(model=MODEL, ids=[10**9]))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "vocabulary" in e.value.details()


def test_models_load_and_unload(stub, pb):
    inference_pb2, _ = pb
    names = [m.name for m in stub.ListModels(inference_pb2.ListModelsRequest()).models]
    assert MODEL in [n.split(":")[0] for n in names]
    assert stub.LoadModel(inference_pb2.LoadModelRequest(model=MODEL)).load_ms >= 0
    running = stub.ListRunning(inference_pb2.ListRunningRequest()).models
    smol = [m for m in running if m.name.split(":")[0] == MODEL]
    assert smol and smol[0].context_length > 0 and smol[0].device
    assert stub.UnloadModel(inference_pb2.UnloadModelRequest(model=MODEL)).unloaded
    assert not stub.UnloadModel(inference_pb2.UnloadModelRequest(model=MODEL)).unloaded
    running = stub.ListRunning(inference_pb2.ListRunningRequest()).models
    assert MODEL not in [m.name.split(":")[0] for m in running]


def test_bad_requests_are_status_codes(stub, pb, server):
    inference_pb2, _ = pb
    opts = inference_pb2.Options(num_predict=4)
    cases = [
        (inference_pb2.GenerateRequest(model="no-such-model", prompt="hi"), grpc.StatusCode.NOT_FOUND, "not found"),
        (inference_pb2.GenerateRequest(model=MODEL, prompt=""), grpc.StatusCode.INVALID_ARGUMENT, "LoadModel"),
        (inference_pb2.GenerateRequest(model=MODEL, prompt="hi", options=inference_pb2.Options(temperature=-1)),
         grpc.StatusCode.INVALID_ARGUMENT, "temperature"),
        (inference_pb2.GenerateRequest(model=MODEL, prompt="hi", options=opts,
                                       format=inference_pb2.Format(json_schema="{not json")),
         grpc.StatusCode.INVALID_ARGUMENT, "json_schema"),
        (inference_pb2.GenerateRequest(model=MODEL, prompt="hi", options=opts,
                                       format=inference_pb2.Format(json_schema='{"type": "no-such-type"}')),
         grpc.StatusCode.INVALID_ARGUMENT, ""),
        (inference_pb2.GenerateRequest(model=MODEL, prompt="hi", keep_alive="soon"),
         grpc.StatusCode.INVALID_ARGUMENT, ""),
        (inference_pb2.GenerateRequest(model=MODEL, prompt="hi " * 20000, options=inference_pb2.Options(num_ctx=64)),
         grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
    ]
    for req, code, words in cases:
        with pytest.raises(grpc.RpcError) as e:
            run(stub.Generate(req))
        assert e.value.code() == code, (req.model, e.value.code(), e.value.details())
        assert words in e.value.details() and e.value.details(), e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        run(stub.Chat(inference_pb2.ChatRequest(
            model=MODEL, messages=[inference_pb2.Message(role="user", content="hi")],
            tools=[inference_pb2.Tool(name="f", parameters_json="[1, 2")])))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "parameters_json" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        stub.Embed(inference_pb2.EmbedRequest(model=MODEL, input=["x"]))
    assert e.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION), e.value
    assert server.alive()


def test_health_and_reflection(server):
    with channel(server) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for service in ("", "mlxr.v1.Inference"):
            r = health.Check(health_pb2.HealthCheckRequest(service=service))
            assert r.status == health_pb2.HealthCheckResponse.SERVING, service
        reflection = reflection_pb2_grpc.ServerReflectionStub(ch)
        [reply] = list(reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        services = {s.name for s in reply.list_services_response.service}
        assert {"mlxr.v1.Inference", "grpc.health.v1.Health"} <= services, services
        [reply] = list(reflection.ServerReflectionInfo(iter([
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="mlxr.v1.Inference")])))
        assert reply.file_descriptor_response.file_descriptor_proto


def test_the_api_key(keyed_server, pb):
    inference_pb2, inference_pb2_grpc = pb
    with channel(keyed_server) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.ListModels(inference_pb2.ListModelsRequest())
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED and "API key" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            stub.ListModels(inference_pb2.ListModelsRequest(), metadata=[("authorization", "Bearer wrong")])
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        r = stub.ListModels(inference_pb2.ListModelsRequest(), metadata=[("authorization", "Bearer sekrit")])
        assert r.models
        # Health answers without the key, as /health does.
        status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""))
        assert status.status == health_pb2.HealthCheckResponse.SERVING


def test_unix_socket(tmp_path, pb):
    inference_pb2, inference_pb2_grpc = pb
    sock = tmp_path / "mlxr.sock"
    s = Server(tmp_path, "--socket", str(sock))
    try:
        # grpcio sends the socket's path as :authority unless told otherwise,
        # which HTTP/2 servers refuse.
        with grpc.insecure_channel(f"unix:{sock}", options=[("grpc.default_authority", "localhost")]) as ch:
            stub = inference_pb2_grpc.InferenceStub(ch)
            text, ids, _, done = run(stub.Generate(inference_pb2.GenerateRequest(
                model=MODEL, prompt="Hi", options=inference_pb2.Options(temperature=0, num_predict=8))))
            assert len(ids) == 8 and done.usage.completion_tokens == 8
    finally:
        s.stop()


def test_show_pull_and_delete(tmp_path, pb):
    """A daemon that may pull over plain http, from the models folder."""
    inference_pb2, inference_pb2_grpc = pb
    handler = functools.partial(QuietFiles, directory=str(models_dir()))
    files = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    s = Server(tmp_path, "--allow-insecure-pulls")
    try:
        with channel(s) as ch:
            stub = inference_pb2_grpc.InferenceStub(ch)
            shown = stub.ShowModel(inference_pb2.ShowModelRequest(model=MODEL))
            assert "im_start" in shown.template and shown.modelfile.startswith("FROM ")
            assert shown.capabilities == ["completion"] and shown.details.quantization_level == "Q4_1"
            assert json.loads(shown.model_info_json)["general.architecture"] == "llama"

            url = f"http://127.0.0.1:{files.server_address[1]}/{MODEL_FILE}"
            progress = list(stub.PullModel(inference_pb2.PullModelRequest(model=url)))
            assert progress[-1].status == "success"
            total = (models_dir() / MODEL_FILE).stat().st_size
            sizes = [p for p in progress if p.total]
            assert sizes and sizes[-1].completed == sizes[-1].total == total
            assert [p.completed for p in sizes] == sorted(p.completed for p in sizes)
            pulled = "smollm2-135m-instruct.q4_1:latest"
            assert pulled in [m.name for m in stub.ListModels(inference_pb2.ListModelsRequest()).models]
            text, ids, _, _ = run(stub.Generate(inference_pb2.GenerateRequest(
                model=pulled, prompt="Hi", options=inference_pb2.Options(num_predict=4))))
            assert len(ids) == 4

            stub.DeleteModel(inference_pb2.DeleteModelRequest(model=pulled))
            assert pulled not in [m.name for m in stub.ListModels(inference_pb2.ListModelsRequest()).models]
            for call in (lambda: stub.DeleteModel(inference_pb2.DeleteModelRequest(model=pulled)),
                         lambda: stub.ShowModel(inference_pb2.ShowModelRequest(model=pulled))):
                with pytest.raises(grpc.RpcError) as e:
                    call()
                assert e.value.code() == grpc.StatusCode.NOT_FOUND, e.value
            with pytest.raises(grpc.RpcError) as e:
                list(stub.PullModel(inference_pb2.PullModelRequest(model=url + ".missing")))
            assert e.value.code() != grpc.StatusCode.OK and e.value.details()
    finally:
        s.stop()
        files.shutdown()


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_a_grpc_port_of_its_own(tmp_path, pb):
    inference_pb2, inference_pb2_grpc = pb
    port = free_port()
    s = Server(tmp_path, "--grpc-port", str(port))
    try:
        assert f"listening for gRPC on 127.0.0.1:{port}" in s.read_log()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            models = inference_pb2_grpc.InferenceStub(ch).ListModels(inference_pb2.ListModelsRequest()).models
            assert MODEL in [m.name.split(":")[0] for m in models]
    finally:
        s.stop()
