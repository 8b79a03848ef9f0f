#!/usr/bin/env python3
"""Drive the llama.cpp reference program and write tests/fixtures/llamacpp/*.json.

Called by make-fixtures.sh (which builds everything first); standard library
only, plus jinja2 when available (then each chat-template case also records
what a Jinja renderer of the GGUF template gives, next to llama.cpp's output).

Two passes per run, so the tokenizer part lands early:
  1. tokenize + chat_template (fast)   -> fixture written with "generate": []
  2. greedy generation (slow)          -> fixture rewritten in full
"""
import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

# llama.cpp has no template of its own for a model whose GGUF lacks
# tokenizer.chat_template; for those we also record this built-in one.
BUILTIN_FALLBACK = {"gemma3": "gemma"}


def hx(s):
    return s.encode("utf-8").hex() if s else "-"


def unhex(h):
    return bytes.fromhex(h).decode("utf-8") if h else ""


def unhex_lossy(h):
    return bytes.fromhex(h).decode("utf-8", errors="replace") if h else ""


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_reference(ref, model_path, requests, threads, n_ctx):
    """requests: list of lists of fields -> list of parsed JSON replies."""
    stdin = "".join("\t".join(r) + "\n" for r in requests)
    p = subprocess.run(
        [ref, model_path, "--threads", str(threads), "--ctx", str(n_ctx)],
        input=stdin.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
    )
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode(errors="replace")[-4000:])
        raise SystemExit(f"reference failed with exit code {p.returncode}")
    out = [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]
    if len(out) != len(requests):
        raise SystemExit(f"expected {len(requests)} replies, got {len(out)}")
    return out


def chat_request(rid, template, add_ass, messages):
    req = ["chat", rid, template, "1" if add_ass else "0"]
    for m in messages:
        req += [hx(m["role"]), hx(m["content"])]
    return req


def jinja_render(template, messages, add_generation_prompt, bos, eos):
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None

    def raise_exception(msg):
        raise RuntimeError(msg)

    # Settings of transformers' apply_chat_template.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=add_generation_prompt,
        bos_token=bos, eos_token=eos)


def fmt(v, depth=0):
    """JSON with one line per list item at the top levels: readable and small."""
    pad = " " * (depth + 1)
    if isinstance(v, dict) and depth < 2:
        items = [f"{pad}{json.dumps(k)}: {fmt(x, depth + 1)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}" if items else "{}"
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and depth < 3:
        items = [pad + json.dumps(x, ensure_ascii=False) for x in v]
        return "[\n" + ",\n".join(items) + "\n" + " " * depth + "]"
    return json.dumps(v, ensure_ascii=False)


def write_fixture(path, fixture):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(fmt(fixture) + "\n")
    os.replace(tmp, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


def previous_generate(path, fixture, gen_inputs):
    """The generate entries of an existing fixture, kept while pass 2 runs (or
    is skipped) if they were made from the same model, llama.cpp and prompts."""
    try:
        old = json.load(open(path, encoding="utf-8"))
    except (OSError, ValueError):
        return []
    same = (old.get("model_sha256") == fixture["model_sha256"]
            and old.get("llama_cpp") == fixture["llama_cpp"]
            and len(old.get("generate", [])) == len(gen_inputs)
            and all({k: e.get(k) for k in g} == g for e, g in zip(old["generate"], gen_inputs)))
    return old["generate"] if same else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--lcp-version", required=True)
    ap.add_argument("--llama-commit", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--only", choices=sorted(MODELS), action="append")
    ap.add_argument("--skip-generate", action="store_true")
    a = ap.parse_args()

    strings = json.load(open(os.path.join(HERE, "tokenize-strings.json"), encoding="utf-8"))
    prompts = json.load(open(os.path.join(HERE, "prompts.json"), encoding="utf-8"))
    os.makedirs(a.out_dir, exist_ok=True)
    names = a.only or list(MODELS)

    fixtures = {}
    # Pass 1: tokenize + chat templates for every model.
    for name in names:
        model_file = MODELS[name]
        model_path = os.path.join(a.models_dir, model_file)
        reqs = [["info"]]
        reqs += [["tokenize", f"t{i}", hx(s)] for i, s in enumerate(strings)]
        cases = prompts["chat_template_cases"]
        reqs += [chat_request(f"c{i}", "-", c["add_generation_prompt"], c["messages"])
                 for i, c in enumerate(cases)]
        fallback = BUILTIN_FALLBACK.get(name)
        if fallback:
            reqs += [chat_request(f"b{i}", hx(fallback), c["add_generation_prompt"], c["messages"])
                     for i, c in enumerate(cases)]
        gen_specs = prompts["models"][name]
        for i, g in enumerate(gen_specs):
            if g["kind"] == "chat":
                reqs.append(chat_request(f"g{i}", "-", True, g["messages"]))
        t0 = time.time()
        replies = run_reference(a.reference, model_path, reqs, a.threads, a.ctx)
        by_id = {r.get("id"): r for r in replies}
        info = replies[0]
        template = unhex(info["chat_template_hex"]) if info["chat_template_hex"] else None

        def rendered(rid):
            r = by_id[rid]
            return unhex(r["rendered_hex"]) if r["rc"] >= 0 else None

        bos = unhex_lossy(info.get("bos_text_hex", ""))
        eos = unhex_lossy(info.get("eos_text_hex", ""))
        ct_cases = []
        if template is not None:
            for i, c in enumerate(cases):
                case = {"name": c["name"], "messages": c["messages"],
                        "add_generation_prompt": c["add_generation_prompt"],
                        "rendered": rendered(f"c{i}")}
                j = jinja_render(template, c["messages"], c["add_generation_prompt"], bos, eos)
                if j is not None:
                    case["jinja_rendered"] = j
                ct_cases.append(case)
        chat_template = {
            "source": template,
            "source_key": "tokenizer.chat_template",
            "renderer": "llama_chat_apply_template(llama_model_chat_template(model, NULL), msgs, add_ass) "
                        "-- llama.cpp's built-in template detection, not a Jinja engine",
            "jinja_rendered": "jinja2 (trim_blocks, lstrip_blocks) render of 'source', as transformers "
                              "does; differs from 'rendered' where llama.cpp's built-in renderer "
                              "ignores parts of the template",
            "cases": ct_cases,
        }
        if template is None:
            chat_template["note"] = "the GGUF has no tokenizer.chat_template; llama_model_chat_template returns NULL"
        if fallback:
            chat_template["builtin_fallback"] = {
                "template": fallback,
                "note": f"llama_chat_apply_template(\"{fallback}\", ...): llama.cpp's built-in template, "
                        "not from the GGUF",
                "cases": [{"name": c["name"], "messages": c["messages"],
                           "add_generation_prompt": c["add_generation_prompt"],
                           "rendered": rendered(f"b{i}")} for i, c in enumerate(cases)],
            }

        gen_inputs = []
        for i, g in enumerate(gen_specs):
            entry = {"name": g["name"], "kind": g["kind"]}
            if g["kind"] == "chat":
                entry["messages"] = g["messages"]
                entry["prompt"] = rendered(f"g{i}")
                if entry["prompt"] is None:
                    raise SystemExit(f"{name}: could not render chat prompt {g['name']}")
            else:
                p = g["prompt"]
                entry["prompt"] = prompts[p["$ref"]] if isinstance(p, dict) else p
            gen_inputs.append(entry)

        settings = dict(info["settings"])
        fixture = {
            "model": name,
            "model_file": model_file,
            "model_sha256": sha256(model_path),
            "llama_cpp": {
                "llama_cpp_python_version": a.lcp_version,
                "llama_cpp_commit": a.llama_commit,
                "llama_version": info["llama_version"],
                "system_info": info["system_info"],
                "settings": settings,
            },
            "model_info": {
                "desc": info["model_desc"], "arch": info["arch"], "n_vocab": info["n_vocab"],
                "bos": info["bos"], "eos": info["eos"], "eot": info["eot"],
                "add_bos": info["add_bos"], "add_eos": info["add_eos"],
                "eog_ids": info["eog_ids"], "n_swa": info["n_swa"],
            },
            "generated_at": datetime.date.today().isoformat(),
            "tokenize_call": "llama_tokenize(vocab, text, add_special=true, parse_special=true)",
            "tokenize": [{"text": s, "ids": by_id[f"t{i}"]["ids"]} for i, s in enumerate(strings)],
            "chat_template": chat_template,
            "generate_call": f"prompt_ids = llama_tokenize(prompt, add_special=true, parse_special=true); "
                             f"fresh context; decode prompt; then up to {prompts['n_steps']} greedy steps; "
                             f"stop early only on llama_vocab_is_eog",
            "generate": [],
        }
        out_path = os.path.join(a.out_dir, f"{name}.json")
        fixture["generate"] = previous_generate(out_path, fixture, gen_inputs)
        fixtures[name] = (fixture, gen_inputs, model_path)
        write_fixture(out_path, fixture)
        print(f"{name}: pass 1 took {time.time() - t0:.1f}s", file=sys.stderr)

    if a.skip_generate:
        return

    # Pass 2: greedy generation.
    for name in names:
        fixture, gen_inputs, model_path = fixtures[name]
        t0 = time.time()
        reqs = [["generate", f"g{i}", str(prompts["n_steps"]), hx(g["prompt"])]
                for i, g in enumerate(gen_inputs)]
        replies = run_reference(a.reference, model_path, reqs, a.threads, a.ctx)
        out = []
        for g, r in zip(gen_inputs, replies):
            e = dict(g)
            e["prompt_ids"] = r["prompt_ids"]
            e["ids"] = r["ids"]
            e["top2_gap"] = r["top2_gap"]
            e["top5"] = r["top5"]
            e["stopped_on_eog"] = r["stopped_on_eog"]
            e["text"] = unhex_lossy(r["text_hex"])
            out.append(e)
        fixture["generate"] = out
        write_fixture(os.path.join(a.out_dir, f"{name}.json"), fixture)
        print(f"{name}: generation took {time.time() - t0:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
