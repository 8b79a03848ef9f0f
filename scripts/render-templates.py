#!/usr/bin/env python3
"""Render the chat-template fixtures the way Hugging Face transformers does.

Writes tests/fixtures/templates/expected.json, which mlxr-template's tests
compare against byte for byte.

The Jinja2 environment copies the one transformers builds in
`utils/chat_template_utils.py::_compile_jinja_template` (checked against
transformers 5.24): an ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks on, keep_trailing_newline off (Jinja2's default), the
loopcontrols extension, a `tojson` filter that is plain `json.dumps` (no HTML
escaping, non-ASCII kept), and the globals `raise_exception` and
`strftime_now`. Like `render_jinja_template`, `tools` and `documents` are
always passed (as None when absent). transformers itself is not imported:
it needs the Hub and heavy dependencies, and only this environment matters.

`strftime_now` reads a fixed clock (FIXED_NOW, UTC) so the output is stable;
the Rust tests pass the same instant.

With --extract, tokenizer.chat_template is first re-read from the GGUF models
in $MLXR_MODELS_DIR (default ~/.cache/mlxr/models; needs `pip install gguf`)
and smollm2.jinja is rewritten from it.

    python3 scripts/render-templates.py [--extract]
"""

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "templates"

# 2024-07-26 09:05:03 UTC, a Friday.
FIXED_NOW = datetime(2024, 7, 26, 9, 5, 3, tzinfo=timezone.utc)


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# name -> (bos_token, eos_token, what it supports)
TEMPLATES = {
    "smollm2": ("<|im_start|>", "<|im_end|>", {}),
    "gemma3": ("<bos>", "<eos>", {}),
    "gemma2": ("<bos>", "<eos>", {}),
    "qwen2.5": ("", "<|im_end|>", {"tools": True}),
    "qwen3": ("", "<|im_end|>", {"tools": True, "thinking": True}),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>", {"tools": True}),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>", {"tools": True}),
    # Its template iterates `tools` unconditionally: it only renders with tools.
    "hermes3-tool-use": ("<|begin_of_text|>", "<|im_end|>", {"tools": True, "tools_only": True}),
    "phi3.5": ("<s>", "<|endoftext|>", {}),
    "mistral-nemo": ("<s>", "</s>", {"tools": True, "call_id": "abc123XYZ"}),
    "mistral-small-3.2": ("<s>", "</s>", {"tools": True, "call_id": "abc123XYZ"}),
    "mixtral": ("<s>", "</s>", {}),
    "deepseek-r1-distill-qwen": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", {}),
    "granite3.3": ("<|end_of_text|>", "<|end_of_text|>", {"tools": True}),
    "gpt-oss": ("<|startoftext|>", "<|return|>", {"tools": True}),
}


def msg(role, content):
    return {"role": role, "content": content}


SYSTEM = msg("system", "You are a terse assistant.")
CONVERSATIONS = {
    "user": [msg("user", "Hello!")],
    "system_user": [SYSTEM, msg("user", "What is 2+2?")],
    "multi_turn": [
        SYSTEM,
        msg("user", "What is 2+2?"),
        msg("assistant", "4."),
        msg("user", "And times 3?"),
    ],
    "multi_turn_no_system": [
        msg("user", "Hi"),
        msg("assistant", "Hello! How can I help?"),
        msg("user", "Tell me a joke."),
    ],
    "assistant_last": [msg("user", "Say OK."), msg("assistant", "OK")],
    "unicode_whitespace": [msg("user", "  Grüße, 世界! 🦀\n\tindented line  \n\n")],
    "special_chars": [msg("user", "He said \"hi\" & <b>bold</b> {{ not_a_var }} {% raw %} \\ back'slash")],
    "thinking_history": [
        msg("user", "2+2?"),
        msg("assistant", "<think>\nadd them\n</think>\n\n4"),
        msg("user", "3+3?"),
    ],
}

# Small templates exercising single Jinja2 features (printing Python values,
# whitespace control, filters, tests, methods, errors) with CONVERSATIONS["system_user"].
FEATURES = [
    "{{ true }}|{{ false }}|{{ none }}|{{ undefined_var }}|",
    "{{ [1, 'a', none, true, 1.5] }}",
    "{{ {'a': 1, 'b': [2]} }}",
    "{{ (1, 2) }}|{{ (1,) }}",
    "{{ 1.0 }}|{{ 4/2 }}|{{ 7/2 }}|{{ 7//2 }}|{{ 2**10 }}|{{ 10 % 3 }}|{{ 1e16 }}|{{ 0.1 + 0.2 }}",
    "{{ 'a' ~ true }}|{{ 'a' ~ none }}|{{ 'a' ~ 1.0 }}",
    "{{ 'x' + 'y' }}|{{ [1] + [2] }}",
    "{{ {'a': 'é<>&\\''} | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ {'b':1,'a':2} | tojson(sort_keys=true) }}|{{ [1,{'a':2}] | tojson(separators=(',', ':')) }}|{{ [1,[2]] | tojson(indent='\\t') }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson(indent=2) }}",
    "{{ messages | tojson }}",
    "{{ 'Hello World' | lower }}|{{ 'hello world' | title }}|{{ 'hello' | capitalize }}|{{ '  x  ' | trim }}|{{ 'a,b' | replace(',', ';') }}",
    "{{ ' a b  c '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'xxhixx'.strip('x') }}|{{ 'a b'.split(' ', 1) }}|{{ 'abc'.startswith(('x','a')) }}",
    "{{ '{} and {}'.format(1, 'b') }}",
    "{{ messages | length }}|{{ messages[-1].content }}|{{ messages[::-1] | map(attribute='role') | join(',') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}",
    "{{ messages | map(attribute='role') | list }}",
    "{% for m in messages %}{{ loop.index }}{{ loop.cycle('a','b') }}{% if loop.previtem is defined %}P{% endif %}{% endfor %}",
    "{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x * 2 %}{% endfor %}{{ ns.x }}",
    "{{ dict(a=1, b=2) }}",
    "{{ 'abc' is string }}|{{ 1 is number }}|{{ 'abc' is iterable }}|{{ {} is mapping }}|{{ [] is sequence }}|{{ 'abc' is sequence }}|{{ none is none }}|{{ true is boolean }}|{{ 1.5 is float }}|{{ 1 is integer }}",
    "{{ undefined_var | length }}",
    "{{ 'x' in undefined_var }}",
    "{{ undefined_var.attr }}",
    "{{ undefined_var is defined }}|{{ undefined_var | default('dflt') }}|{{ '' | default('dflt', true) }}",
    "{% for x in undefined_var %}X{% endfor %}ok",
    "{{ 'a' in {'a': 1} }}|{{ 1 in [1,2] }}|{{ 'ell' in 'hello' }}",
    "{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}",
    "{% filter upper %}shout{% endfilter %}",
    "{{ [3,1,2] | sort | join(',') }}|{{ [3,1,2] | max }}|{{ [1,2,3] | sum }}|{{ [1,2,2] | unique | list }}|{{ 'abc' | reverse }}|{{ [1,2] | first }}|{{ 'abc' | last }}",
    "{{ 3.14159 | round(2) }}|{{ -3 | abs }}|{{ '42' | int }}|{{ '4.5' | float }}|{{ 42 | string }}|{{ true | string }}|{{ [1] | string }}",
    "{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | items | list }}",
    "{{ {'b': 1, 'a': 2}.items() | list }}|{{ {'b': 1}.keys() | list }}|{{ {'b': 1}.get('c', 'none!') }}",
    "{{ \"line1\\nline2\" | indent(2) }}",
    "{{ 'ab' * 3 }}",
    "{{ [1,2,3][1:] }}|{{ 'hello'[1:3] }}|{{ 'hello'[-1] }}",
    "{{ messages[0].content | trim | length }}",
    "  {% if true %}lstrip{% endif %}",
    "{{ raise_exception('boom') }}",
    "{{ x.y }}",
    "{{ 'a' + 1 }}",
    "{{ messages[5] }}|{{ messages[5] is defined }}",
    "{{ messages[0]['nope'] }}|{{ messages[0].nope is defined }}",
    "{{ '\\u00e9' }}|{{ 'tab\\there' }}",
    "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for x in [1,2,3,4] %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{{ 10 | batch(3) | list }}",
    "{{ [1,2,3,4,5] | batch(2) | list }}",
    "{{ 'x'.upper() }}{{ 'X'.lower() }}{{ 'abc'.replace('b', 'B') }}{{ 'abc'.find('c') }}{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|",
    "{{ 'a\\nb'.splitlines() }}",
    "{{ messages[0].content.strip().upper() }}",
    "{{ 1 == 1.0 }}|{{ '1' == 1 }}|{{ none == none }}",
    "{{ [1,2] == [1,2] }}|{{ {'a':1} == {'a':1} }}",
    "{{ 0.1 }}|{{ -0.0 }}|{{ 1/3 }}|{{ 100000000000000000000 }}|{{ 2 ** 70 }}",
    "{{ messages[0] }}",
    "{{ tools }}|{{ tools is none }}|{{ documents }}",
    "{{ bos_token ~ eos_token }}",
    "{{ strftime_now('%Y') }}",
    "{{ range(3) | list }}|{{ range(1, 10, 3) | list }}",
    "{{ 'abc' | list }}|{{ 'a' < 'b' }}|{{ [1, 'a'] | length }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
    "{{ \"%.2f\" | format(3.14159) }}",
    "{{ 'x' if false }}|",
    "{{ \"a\" \"b\" }}",
    "{{ 'ABC' | lower is string }}",
    "{%- if true %}\n  yes\n{%- endif %}\n",
    "{% if true %}\n    indented\n{% endif %}\nafter\n",
    "  {% if true %}lstrip{% endif %}  \n",
    "a\n  {# comment #}\nb\n",
    "a\n  {#- comment -#}  \nb",
    "x  {%+ if true %}kept{% endif %}\n",
    "line\n\n",
    "line\r\n{% if true %}\r\nwin\r\n{% endif %}\r\n",
    "{% raw %}{{ not }}{% endraw %}\n",
    "{% set x %}\n  block {{ 1 }}\n{% endset %}[{{ x }}]",
    "{% macro greet(n) %}\n  Hi {{ n }}\n{% endmacro %}\n{{ greet('a') }}{{ greet('b') }}",
    "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
    "{% for m in messages -%}\n  {{ m.role }}\n{%- endfor %}",
    "  {{ 'expr' }}  \n  {% if true %}\n  text\n  {% endif %}\n",
    "{% if true %}   {# c #}   x{% endif %}",
    "{{ 'a' }}\n{% if false %}no{% else %}\nelse\n{% endif %}",
    "{% for m in messages %}{{ loop.index0 }}{% if not loop.last %}, {% endif %}{% endfor %}\n\n",
    "{%- for m in messages %}\n    {%- if m.role == 'user' %}\n        {{- m.content }}\n    {%- endif %}\n{%- endfor %}\n",
    "{{ 'abc' is sequence }}|{{ {'a':1} is sequence }}|{{ {'a':1} is iterable }}|{{ 1 is iterable }}|{{ none is iterable }}",
    "{{ messages | selectattr('role', 'eq', 'user') | map(attribute='content') | first }}",
    "{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}",
    "{{ messages | map(attribute='role') | unique | list }}",
    "{{ messages | groupby('role') | list | length }}",
    "{{ messages[0].content is string and messages[0].content | length > 0 }}",
    "{{ (messages | length) // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7.5 // 2 }}",
    "{{ 'abc'.endswith('c') }}{{ 'a-b'.split('-')[1] }}{{ 'a b'.title() }}{{ 'A'.isupper() }}",
    "{{ [1,2,3] | select('odd') | list }}|{{ [1,2,3] | reject('even') | list }}",
    "{{ [{'a':2},{'a':1}] | sort(attribute='a') | map(attribute='a') | list }}",
    "{{ 'a'.join(['x','y']) }}",
    "{{ {'a': {'b': 1}}.a.b }}|{{ {'a': none}.a is none }}",
    "{{ messages[0].get('role') }}|{{ messages[0].get('nope', 'd') }}|{{ messages[0].get('nope') }}",
    "{% set d = {'k': 'v'} %}{% for k in d %}{{ k }}{% endfor %}|{{ d | length }}",
    "{{ 'x' | e }}|{{ '<>' | escape }}|{{ '<>' | safe }}",
    "{{ 1 if 'a' else 2 }}|{{ [] or 'empty' }}|{{ '' and 'x' }}|{{ 0 or none }}",
    "{{ 3 > 2 > 1 }}",
    "{{ [1, 2, 3] | last }}|{{ messages | last }}",
    "{{ 1.0 | tojson }}|{{ 1e20 | tojson }}|{{ 3 | tojson }}|{{ true | tojson }}|{{ none | tojson }}",
    "{{ {1: 'a', true: 'b', none: 'c'} | tojson }}",
    "{{ (1, 2) | tojson }}",
    "{{ 'x' | tojson(indent=2) }}|{{ {'a': [1, {}], 'b': {}} | tojson(indent=2) }}",
    "{{ {'b': 1, 'a': {'d': 1, 'c': 2}} | tojson(sort_keys=true, indent=1) }}",
    "{{ [1] | tojson(true) }}",
    "{{ messages | tojson(ensure_ascii=true) }}",
    "{{ 1 + 1.5 }}|{{ 10 / 4 }}|{{ 2 * 1.5 }}|{{ 0.5 * 2 }}",
    "{{ '%d items' | format(3) }}",
    "{{ 'x' ~ [1] ~ {'a': 1} }}",
    "{{ [1, 'a'] | join('-') }}|{{ [true, none] | join }}",
    "{{ 'abc' | upper | replace('B', 'b') }}",
    "{{ 'a' * 0 }}|{{ [0] * 2 }}",
    "{% for m in messages %}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{% endfor %}",
    "{% for m in messages if m.role == 'user' %}{{ loop.index }}{{ m.role }}{% endfor %}",
    "{% for m in [] %}x{% else %}empty{% endfor %}",
    "{% set x = 1 %}{% for m in messages %}{% set x = x + 1 %}{% endfor %}{{ x }}",
    "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% endif %}{{ sys }}",
    "{{ messages[0]['content'][0] }}|{{ messages[0]['content'][:3] }}",
    "{{ 'é'|length }}|{{ '🦀'|length }}|{{ '🦀x'[1] }}",
    "{{ 'a' is lower }}|{{ 'A' is upper }}|{{ 4 is divisibleby 2 }}|{{ 3 is odd }}|{{ 'a' is in ['a'] }}|{{ 1 is eq 1 }}|{{ messages is defined }}|{{ true is true }}|{{ false is false }}",
    "{{ none | string }}|{{ none ~ '' }}|{{ none | default('d') }}|{{ none | default('d', true) }}",
    "{{ 'Ä' | lower }}|{{ 'ß' | upper }}",
    "{{ ' \\u3000x\\u3000 ' | trim }}|{{ '\\x1cx' | trim }}",
]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather for a city — in °C or °F.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                    "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7.5, "nullable": True},
                },
                "required": ["location"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "noop",
            "description": "Does nothing.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def tool_conversation(call_id):
    return [
        msg("user", "Weather in Paris?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"location": "Paris", "days": 2}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": "get_weather", "content": "{\"temp\": 21.5}"},
    ]


def cases():
    for name, (bos, eos, supports) in TEMPLATES.items():
        base = {"template": name, "bos_token": bos, "eos_token": eos, "tools": None, "extra": {}}
        for conv_name, messages in CONVERSATIONS.items():
            if supports.get("tools_only"):
                break
            for agp in (True, False):
                yield {**base, "name": f"{name}/{conv_name}/gen={agp}", "messages": messages,
                       "add_generation_prompt": agp}
        if supports.get("tools"):
            yield {**base, "name": f"{name}/tools/user", "messages": [SYSTEM, msg("user", "Weather in Paris?")],
                   "add_generation_prompt": True, "tools": TOOLS}
            call_id = supports.get("call_id", "call_0001")
            yield {**base, "name": f"{name}/tools/call_and_result", "messages": tool_conversation(call_id),
                   "add_generation_prompt": True, "tools": TOOLS}
        if supports.get("thinking"):
            yield {**base, "name": f"{name}/enable_thinking=false", "messages": CONVERSATIONS["user"],
                   "add_generation_prompt": True, "extra": {"enable_thinking": False}}
    yield {"template": "llama3.1", "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "tools": None,
           "name": "llama3.1/date_string", "messages": CONVERSATIONS["system_user"],
           "add_generation_prompt": True, "extra": {"date_string": "01 Jan 2030"}}
    yield {"template": "gpt-oss", "bos_token": "<|startoftext|>", "eos_token": "<|return|>", "tools": None,
           "name": "gpt-oss/reasoning_effort", "messages": CONVERSATIONS["user"],
           "add_generation_prompt": True, "extra": {"reasoning_effort": "high", "builtin_tools": ["python"]}}
    for i, source in enumerate(FEATURES):
        yield {"template": None, "source": source, "bos_token": "<s>", "eos_token": "</s>", "tools": None,
               "name": f"feature/{i}", "messages": [msg("system", "  sys  "), msg("user", "Hi there")],
               "add_generation_prompt": True, "extra": {}}


def render(env, case):
    source = case.get("source") or (FIXTURES / f"{case['template']}.jinja").read_text(encoding="utf-8")
    template = env.from_string(source)
    return template.render(
        messages=case["messages"],
        tools=case["tools"],
        documents=None,
        add_generation_prompt=case["add_generation_prompt"],
        bos_token=case["bos_token"],
        eos_token=case["eos_token"],
        **case["extra"],
    )


def extract_from_gguf():
    import gguf  # imported here: only --extract needs it

    models = Path(os.environ.get("MLXR_MODELS_DIR", Path.home() / ".cache" / "mlxr" / "models"))
    for file_name, fixture in [("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2"),
                               ("gemma-3-270m-q4_k_m.gguf", None)]:
        reader = gguf.GGUFReader(models / file_name)
        field = reader.fields.get("tokenizer.chat_template")
        if field is None:
            print(f"{file_name}: no tokenizer.chat_template", file=sys.stderr)
            continue
        text = bytes(field.parts[field.data[0]]).decode("utf-8")
        if fixture is None:
            print(f"{file_name}: has a template now; add it as a fixture", file=sys.stderr)
            continue
        (FIXTURES / f"{fixture}.jinja").write_text(text, encoding="utf-8")
        print(f"{file_name} -> {fixture}.jinja", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", action="store_true", help="re-extract templates from the GGUF models first")
    args = parser.parse_args()
    if args.extract:
        extract_from_gguf()

    env = make_environment()
    out = []
    for case in cases():
        entry = dict(case)
        entry["now_unix_secs"] = int(FIXED_NOW.timestamp())
        try:
            entry["expected"] = render(env, case)
            entry["error"] = None
        except Exception as err:  # noqa: BLE001 - any failure is an expected outcome to record
            entry["expected"] = None
            entry["error"] = f"{type(err).__name__}: {err}"
        out.append(entry)

    path = FIXTURES / "expected.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    errors = sum(1 for e in out if e["error"])
    print(f"wrote {len(out)} cases ({errors} expected errors) to {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
