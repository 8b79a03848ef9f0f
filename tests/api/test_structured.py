"""Structured output through the official clients against a real `mlxr
serve` with Qwen2.5-Coder-0.5B: OpenAI `response_format` (json_schema on 24
schemas, every reply validated by the `jsonschema` package; json_object) on
chat, streamed and not, and on completions; Ollama `format` (a schema and
"json") on /api/chat and /api/generate; MLXR's `grammar` extension (regex
and Lark); malformed schemas and grammars are a 400 that names the problem;
`--grammar-masks ahead` (masks computed while the forward pass runs) replies
as the CPU's default lazy masks do.
"""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import ollama
import openai
import pytest
import requests

from conftest import MODEL, QWEN, Server


NAME = {"type": "string", "maxLength": 40}

# (what to ask for, schema): nested objects, arrays, enums, required fields,
# bounded numbers, anyOf, const, nullable, $defs/$ref, patterns, formats.
SCHEMAS = [
    ("a person with a name and an age",
     {"type": "object", "properties": {"name": NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
      "required": ["name", "age"], "additionalProperties": False}),
    ("a book with title, author and year",
     {"type": "object", "properties": {"title": NAME, "author": NAME,
                                       "year": {"type": "integer", "minimum": 1400, "maximum": 2030}},
      "required": ["title", "author", "year"]}),
    ("the primary colors",
     {"type": "object", "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue", "yellow"]},
                                                  "minItems": 1, "maxItems": 4}},
      "required": ["colors"]}),
    ("a traffic light state",
     {"type": "object", "properties": {"state": {"type": "string", "enum": ["red", "amber", "green"]}},
      "required": ["state"]}),
    ("the temperature in Paris today in Celsius",
     {"type": "object", "properties": {"city": {"const": "Paris"},
                                       "celsius": {"type": "number", "minimum": -40, "maximum": 50}},
      "required": ["city", "celsius"]}),
    ("a company with its address",
     {"type": "object", "properties": {
         "name": NAME,
         "address": {"type": "object", "properties": {"street": NAME, "city": NAME, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                     "required": ["street", "city", "zip"], "additionalProperties": False}},
      "required": ["name", "address"]}),
    ("three prime numbers",
     {"type": "object", "properties": {"primes": {"type": "array", "items": {"type": "integer", "minimum": 2, "maximum": 100},
                                                  "minItems": 3, "maxItems": 3}},
      "required": ["primes"]}),
    ("whether water is wet",
     {"type": "object", "properties": {"answer": {"type": "boolean"}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
      "required": ["answer", "confidence"]}),
    ("a shape: either a circle with a radius or a square with a side",
     {"type": "object", "properties": {"shape": {"anyOf": [
         {"type": "object", "properties": {"kind": {"const": "circle"}, "radius": {"type": "number", "minimum": 0}},
          "required": ["kind", "radius"], "additionalProperties": False},
         {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number", "minimum": 0}},
          "required": ["kind", "side"], "additionalProperties": False}]}},
      "required": ["shape"]}),
    ("a user whose middle name may be missing (null)",
     {"type": "object", "properties": {"first": NAME, "middle": {"type": ["string", "null"], "maxLength": 40}, "last": NAME},
      "required": ["first", "middle", "last"]}),
    ("a todo list with two items",
     {"type": "object", "properties": {"items": {"type": "array", "maxItems": 4, "items": {
         "type": "object", "properties": {"task": NAME, "done": {"type": "boolean"}},
         "required": ["task", "done"], "additionalProperties": False}}},
      "required": ["items"]}),
    ("a family tree: a parent with children",
     {"$defs": {"person": {"type": "object", "properties": {"name": NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                           "required": ["name", "age"], "additionalProperties": False}},
      "type": "object", "properties": {"parent": {"$ref": "#/$defs/person"},
                                       "children": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 3}},
      "required": ["parent", "children"]}),
    ("an HTTP status code and its reason",
     {"type": "object", "properties": {"code": {"type": "integer", "minimum": 100, "maximum": 599},
                                       "reason": {"type": "string", "maxLength": 30}},
      "required": ["code", "reason"]}),
    ("a hex color for sky blue",
     {"type": "object", "properties": {"hex": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"}}, "required": ["hex"]}),
    ("an email address for a support desk",
     {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]}),
    ("a date in ISO format for new year 2025",
     {"type": "object", "properties": {"date": {"type": "string", "format": "date"}}, "required": ["date"]}),
    ("a list of two programming languages",
     {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 2, "maxItems": 2}),
    ("the number of planets in the solar system",
     {"type": "integer", "minimum": 0, "maximum": 20}),
    ("a matrix of 2 by 2 integers",
     {"type": "object", "properties": {"rows": {"type": "array", "minItems": 2, "maxItems": 2,
                                                "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                                          "items": {"type": "integer", "minimum": -9, "maximum": 9}}}},
      "required": ["rows"]}),
    ("a product with price and currency",
     {"type": "object", "properties": {"product": NAME, "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 10000},
                                       "currency": {"enum": ["USD", "EUR", "GBP"]}},
      "required": ["product", "price", "currency"], "additionalProperties": False}),
    ("a key-value settings map with two boolean flags",
     {"type": "object", "additionalProperties": {"type": "boolean"}, "maxProperties": 4}),
    ("a version number",
     {"type": "object", "properties": {"major": {"type": "integer", "minimum": 0, "maximum": 99},
                                       "minor": {"type": "integer", "minimum": 0, "maximum": 99},
                                       "tag": {"anyOf": [{"type": "null"}, {"enum": ["alpha", "beta", "rc"]}]}},
      "required": ["major", "minor", "tag"]}),
    ("a recipe with ingredients and steps",
     {"type": "object", "properties": {"name": NAME,
                                       "ingredients": {"type": "array", "items": NAME, "minItems": 1, "maxItems": 5},
                                       "steps": {"type": "array", "items": {"type": "string", "maxLength": 60}, "minItems": 1, "maxItems": 3}},
      "required": ["name", "ingredients", "steps"]}),
    ("the answer to 6 times 7",
     {"type": "object", "properties": {"result": {"type": "integer"}, "unit": {"type": "null"}},
      "required": ["result", "unit"]}),
]




@pytest.fixture
def oai(qwen):
    return openai.OpenAI(base_url=qwen.url + "/v1", api_key="unused", max_retries=0)


def messages(what):
    return [{"role": "system", "content": "You answer with JSON only."},
            {"role": "user", "content": f"Give me {what} as JSON."}]


def schema_format(schema, name="answer"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def test_json_schema_replies_validate(oai):
    def one(case):
        what, schema = case
        r = oai.chat.completions.create(model=QWEN, messages=messages(what), temperature=0,
                                        max_tokens=300, response_format=schema_format(schema))
        return what, schema, r.choices[0]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, SCHEMAS))
    assert len(results) >= 20
    for what, schema, choice in results:
        assert choice.finish_reason == "stop", (what, choice.message.content)
        jsonschema.validate(json.loads(choice.message.content), schema)


def test_json_schema_streamed_and_sampled(oai):
    what, schema = SCHEMAS[5]
    for seed in range(3):
        stream = oai.chat.completions.create(
            model=QWEN, messages=messages(what), temperature=0.9, seed=seed, max_tokens=300,
            stream=True, response_format=schema_format(schema, "company"))
        text, finish = "", None
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        assert finish == "stop", text
        jsonschema.validate(json.loads(text), schema)


def test_masks_ahead_reply_as_lazy_masks(server, tmp_path):
    """Seeded sampling at a high temperature (the grammar refuses many drawn
    tokens), 4 requests at once: the same replies from a daemon that computes
    every mask ahead as from the default one (lazy on the CPU)."""
    ahead = Server(tmp_path, "--grammar-masks", "ahead")
    try:
        def replies(url):
            client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)

            def one(seed):
                what, schema = SCHEMAS[seed % 3]
                r = client.chat.completions.create(
                    model=MODEL, messages=messages(what), temperature=1.3, seed=seed, max_tokens=60,
                    response_format=schema_format(schema))
                return r.choices[0].message.content

            with ThreadPoolExecutor(4) as pool:
                return list(pool.map(one, range(4)))

        lazy = replies(server.url)
        assert all(lazy), lazy
        assert replies(ahead.url) == lazy
    finally:
        ahead.stop()


def test_json_object_and_completions(oai):
    r = oai.chat.completions.create(model=QWEN, messages=messages("a cat"), temperature=0,
                                    max_tokens=200, response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    schema = SCHEMAS[0][1]
    r = oai.completions.create(model=QWEN, prompt="A person as JSON:", temperature=0, max_tokens=100,
                               extra_body={"response_format": schema_format(schema)})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), schema)
    # "text" is no constraint at all.
    r = oai.chat.completions.create(model=QWEN, messages=messages("a cat"), temperature=0,
                                    max_tokens=5, response_format={"type": "text"})
    assert r.choices[0].finish_reason == "length"


def test_ollama_format(qwen):
    client = ollama.Client(host=qwen.url)
    what, schema = SCHEMAS[11]
    r = client.chat(model=QWEN, messages=messages(what), format=schema,
                    options={"temperature": 0, "num_predict": 300})
    assert r.done_reason == "stop"
    jsonschema.validate(json.loads(r.message.content), schema)
    text = ""
    for part in client.generate(model=QWEN, prompt="Describe a dog as JSON.", format="json", stream=True,
                                options={"temperature": 0, "num_predict": 200}):
        text += part.response
    assert isinstance(json.loads(text), dict)


def test_grammar_extension(oai, qwen):
    r = oai.chat.completions.create(model=QWEN, messages=[{"role": "user", "content": "What is 12 times 12?"}],
                                    temperature=0, max_tokens=20,
                                    extra_body={"grammar": {"type": "regex", "value": "[0-9]{1,4}"}})
    assert re.fullmatch("[0-9]{1,4}", r.choices[0].message.content)
    lark = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no"\n'
    r = requests.post(qwen.url + "/api/generate", json={
        "model": QWEN, "prompt": "Is the sky blue?", "stream": False, "grammar": lark,
        "options": {"temperature": 0, "num_predict": 20}}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["response"] in ("The answer is yes.", "The answer is no.")


@pytest.mark.parametrize("body, needle", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}}, "json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"properties": {"a": {"$ref": "#/nope"}}}}}}, "json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}}, "name"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}}}, "schema"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"grammar": {"type": "regex", "value": "(unclosed"}}, "regex"),
    ({"grammar": "start: missing_rule"}, "grammar"),
    ({"grammar": {"type": "gbnf", "value": "root ::= x"}}, "grammar"),
    ({"grammar": "start: /a/", "response_format": {"type": "json_object"}}, "cannot be combined"),
])
def test_bad_constraints_are_400(qwen, body, needle):
    r = requests.post(qwen.url + "/v1/chat/completions", json={
        "model": QWEN, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, **body}, timeout=60)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_bad_ollama_format_is_400(qwen):
    # The ollama client refuses these itself: sent as raw bodies.
    for bad in ("yaml", 42, ["json"]):
        r = requests.post(qwen.url + "/api/chat", json={
            "model": QWEN, "messages": [{"role": "user", "content": "hi"}], "format": bad}, timeout=60)
        assert r.status_code == 400 and "invalid format" in r.json()["error"], r.text
    client = ollama.Client(host=qwen.url)
    r = requests.post(qwen.url + "/api/chat", json={
        "model": QWEN, "messages": [{"role": "user", "content": "hi"}], "format": {"type": "strin"}}, timeout=60)
    assert r.status_code == 400 and "json_schema" in r.json()["error"]
    # The server still answers.
    r = client.chat(model=QWEN, messages=[{"role": "user", "content": "hi"}], format="json",
                    options={"temperature": 0, "num_predict": 50})
    assert r.message.content.startswith("{")
