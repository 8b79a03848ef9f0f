"""Tool calling through the official clients against a real `mlxr serve`:
Qwen2.5-Coder-0.5B (its template's Hermes `<tool_call>` format) and SmolLM2
(no tools in its template: MLXR lists them in a system message). A weather
conversation end to end, streamed and not (the call parsed, its arguments
valid under the tool's schema, the tool's result sent back and seen);
tool_choice none/auto/required/named; parallel calls and
parallel_tool_calls=false; Ollama's /api/chat with tools and tool messages;
bad tools are a 400.
"""

import json

import jsonschema
import ollama
import openai
import pytest
import requests

from conftest import MODEL, QWEN


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current local time in a time zone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}




@pytest.fixture
def oai(qwen):
    return openai.OpenAI(base_url=qwen.url + "/v1", api_key="unused", max_retries=0)


def ask(text):
    return [{"role": "user", "content": text}]


def check_call(call, name=None):
    """A call in OpenAI's shape whose arguments validate."""
    assert call.type == "function" and call.id.startswith("call_")
    if name:
        assert call.function.name == name
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return args


def test_weather_conversation_end_to_end(oai):
    messages = ask("What is the weather like in Paris today?")
    r = oai.chat.completions.create(model=QWEN, messages=messages, tools=[WEATHER], temperature=0, max_tokens=100)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert check_call(call, "get_weather")["city"] == "Paris"
    # The call and its result go back; the model answers from the result
    # (tool_choice "none": 0.5B Qwen answers in text only so).
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_celsius": 21, "sky": "sunny"})},
    ]
    r = oai.chat.completions.create(model=QWEN, messages=messages, tools=[WEATHER], tool_choice="none",
                                    temperature=0, max_tokens=60)
    assert r.choices[0].finish_reason == "stop"
    assert not r.choices[0].message.tool_calls
    assert "21" in r.choices[0].message.content


def test_streamed_calls_arrive_whole_with_index_and_id(oai):
    stream = oai.chat.completions.create(model=QWEN, messages=ask("What is the weather like in Paris today?"),
                                         tools=[WEATHER], temperature=0, max_tokens=100, stream=True)
    calls, content, finish = {}, "", None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
            entry["name"] += tc.function.name or ""
            entry["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert content == ""  # no call markup leaks into the text
    assert list(calls) == [0] and calls[0]["id"].startswith("call_")
    assert calls[0]["name"] == "get_weather"
    jsonschema.validate(json.loads(calls[0]["arguments"]), SCHEMAS["get_weather"])


def test_tool_choice_required_named_and_none(oai):
    # Required: a call even where the question needs none.
    r = oai.chat.completions.create(model=QWEN, messages=ask("Say hello."), tools=[WEATHER, TIME],
                                    tool_choice="required", temperature=0, max_tokens=100)
    assert r.choices[0].finish_reason == "tool_calls"
    for call in r.choices[0].message.tool_calls:
        check_call(call)
    # Named: that function.
    r = oai.chat.completions.create(model=QWEN, messages=ask("What is the weather like in Paris today?"),
                                    tools=[WEATHER, TIME], temperature=0, max_tokens=100,
                                    tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert [c.function.name for c in r.choices[0].message.tool_calls][0] == "get_time"
    for call in r.choices[0].message.tool_calls:
        check_call(call, "get_time")
    # None: text.
    r = oai.chat.completions.create(model=QWEN, messages=ask("What is the weather like in Paris today?"),
                                    tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=30)
    assert not r.choices[0].message.tool_calls and r.choices[0].message.content


def test_parallel_calls(oai):
    question = ask("What is the weather in Paris and what is the weather in Rome?")
    r = oai.chat.completions.create(model=QWEN, messages=question, tools=[WEATHER], tool_choice="required",
                                    temperature=0, max_tokens=200)
    calls = r.choices[0].message.tool_calls
    assert len(calls) >= 2, calls
    assert len({c.id for c in calls}) == len(calls)
    cities = {check_call(c, "get_weather")["city"] for c in calls}
    assert {"Paris", "Rome"} <= cities
    r = oai.chat.completions.create(model=QWEN, messages=question, tools=[WEATHER], tool_choice="required",
                                    parallel_tool_calls=False, temperature=0, max_tokens=200)
    assert len(r.choices[0].message.tool_calls) == 1
    # Streamed: one delta per call, numbered from 0, each with its own id.
    stream = oai.chat.completions.create(model=QWEN, messages=question, tools=[WEATHER], tool_choice="required",
                                         temperature=0, max_tokens=200, stream=True)
    deltas = [tc for chunk in stream if chunk.choices for tc in chunk.choices[0].delta.tool_calls or []]
    assert [d.index for d in deltas] == list(range(len(calls)))
    assert [d.id for d in deltas] != [None] * len(deltas) and len({d.id for d in deltas}) == len(deltas)
    assert [json.loads(d.function.arguments) for d in deltas] == [json.loads(c.function.arguments) for c in calls]


def test_a_model_without_tools_in_its_template(server):
    """SmolLM2: the tools are described in a system message, and a
    required call is forced in the plain JSON shape."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    r = client.chat.completions.create(model=MODEL, messages=ask("What is the weather like in Paris today?"),
                                       tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=100)
    assert r.choices[0].finish_reason == "tool_calls"
    [call] = r.choices[0].message.tool_calls
    check_call(call, "get_weather")


def test_ollama_chat_with_tools(qwen):
    client = ollama.Client(host=qwen.url)
    messages = ask("What is the weather like in Paris today?")
    r = client.chat(model=QWEN, messages=messages, tools=[WEATHER], options={"temperature": 0, "num_predict": 100})
    [call] = r.message.tool_calls
    assert call.function.name == "get_weather"
    assert isinstance(call.function.arguments, dict)  # an object, not a string
    jsonschema.validate(dict(call.function.arguments), SCHEMAS["get_weather"])
    assert r.done_reason == "stop"
    streamed = [c for part in client.chat(model=QWEN, messages=messages, tools=[WEATHER], stream=True,
                                          options={"temperature": 0, "num_predict": 100})
                for c in (part.message.tool_calls or [])]
    assert [c.function.name for c in streamed] == ["get_weather"]
    # Ollama's tool message: tool_name.
    messages += [{"role": "assistant", "content": "", "tool_calls": [call.model_dump()]},
                 {"role": "tool", "tool_name": "get_weather", "content": "21 degrees and sunny"}]
    r = client.chat(model=QWEN, messages=messages, options={"temperature": 0, "num_predict": 40})
    assert r.message.content


@pytest.mark.parametrize("body, needle", [
    ({"tools": [{"type": "function"}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "name"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
    ({"tool_choice": "required"}, "needs tools"),
    ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}}, "cannot be combined"),
    ({"tools": [WEATHER] * 129}, "tools"),
    ({"functions": [{"name": "f"}]}, "deprecated"),
])
def test_bad_tools_are_400(qwen, body, needle):
    r = requests.post(qwen.url + "/v1/chat/completions", json={
        "model": QWEN, "messages": ask("hi"), "max_tokens": 5, **body}, timeout=60)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_history_with_bad_arguments_is_400(qwen):
    r = requests.post(qwen.url + "/v1/chat/completions", json={"model": QWEN, "max_tokens": 5, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{not json"}}]}]},
        timeout=60)
    assert r.status_code == 400 and "arguments" in r.json()["error"]["message"]
