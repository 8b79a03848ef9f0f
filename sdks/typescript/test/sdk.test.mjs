// The TypeScript SDK (dist/, built by tsc) against a real `mlxr serve`.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import { Client, ResponseError } from "../dist/index.js";
import { EMBED_MODEL, MODEL, MODEL_FILE, modelsDir, serveModelFiles, startDaemon, startSocketDaemon } from "./daemon.mjs";

const TINY_FOLDER = resolve(fileURLToPath(import.meta.url), "../../../../tests/fixtures/tiny-models/llama");
const HI = [{ role: "user", content: "Name three colours." }];
const GREEDY = { temperature: 0, seed: 7, num_predict: 24 };

let daemon, keyed, unix, files, client, overSocket;

before(async () => {
  [daemon, keyed, unix, files] = await Promise.all([
    startDaemon("--allow-insecure-pulls"),
    startDaemon("--api-key", "sekrit"),
    startSocketDaemon("--allow-insecure-pulls"),
    serveModelFiles(),
  ]);
  client = new Client({ host: daemon.url });
  overSocket = new Client({ host: `unix:${unix.socket}` });
});

after(async () => {
  await Promise.all([daemon?.stop(), keyed?.stop(), unix?.stop(), files?.close()]);
});

test("version", async () => {
  assert.match(await client.version(), /^\d+\.\d+\.\d+/);
});

test("a streamed chat equals the whole reply", async () => {
  const whole = await client.chat({ model: MODEL, messages: HI, options: GREEDY });
  assert.equal(whole.done, true);
  assert.equal(whole.message.role, "assistant");
  assert.equal(whole.eval_count, 24);
  assert.ok(whole.message.content.length > 0);
  const parts = [];
  for await (const part of await client.chat({ model: MODEL, messages: HI, stream: true, options: GREEDY })) {
    parts.push(part);
  }
  assert.ok(parts.length > 2);
  assert.equal(parts.at(-1).done, true);
  assert.equal(parts.filter((p) => p.done).length, 1);
  assert.equal(parts.map((p) => p.message.content).join(""), whole.message.content);
});

test("leaving a stream early ends it and the daemon goes on", async () => {
  let n = 0;
  for await (const part of await client.generate({ model: MODEL, prompt: "Count to 100:", stream: true, options: { temperature: 0, num_predict: 500 } })) {
    assert.equal(part.done, false);
    if (++n === 3) break;
  }
  const r = await client.generate({ model: MODEL, prompt: "Hi", options: { num_predict: 2 } });
  assert.equal(r.eval_count, 2);
});

test("aborting a stream's signal ends it with an AbortError", async () => {
  const controller = new AbortController();
  const stream = await client.generate({ model: MODEL, prompt: "Count to 100:", stream: true, signal: controller.signal,
    options: { temperature: 0, num_predict: 500 } });
  await assert.rejects(async () => {
    let n = 0;
    for await (const part of stream) {
      assert.equal(part.done, false);
      if (++n === 2) controller.abort();
    }
  }, { name: "AbortError" });
  assert.equal((await client.chat({ model: MODEL, messages: HI, options: { num_predict: 2 } })).eval_count, 2);
});

test("generate, streamed and whole, with format", async () => {
  const whole = await client.generate({ model: MODEL, prompt: "The capital of France is", options: GREEDY });
  assert.ok(whole.response.length > 0 && whole.context.length > 0);
  let text = "";
  for await (const part of await client.generate({ model: MODEL, prompt: "The capital of France is", stream: true, options: GREEDY })) {
    text += part.response;
  }
  assert.equal(text, whole.response);
  const schema = { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"], additionalProperties: false };
  const json = await client.generate({ model: MODEL, prompt: "A city as JSON", format: schema, options: { ...GREEDY, num_predict: 64 } });
  assert.deepEqual(Object.keys(JSON.parse(json.response)), ["city"]);
});

test("embed", async () => {
  const r = await client.embed({ model: EMBED_MODEL, input: ["a cat sits on the mat", "a kitten sits on the rug", "tax law"] });
  assert.equal(r.embeddings.length, 3);
  assert.equal(r.embeddings[0].length, 384);
  const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  assert.ok(dot(r.embeddings[0], r.embeddings[1]) > dot(r.embeddings[0], r.embeddings[2]));
  assert.equal((await client.embed({ model: EMBED_MODEL, input: "one", dimensions: 64 })).embeddings[0].length, 64);
});

test("list, show, ps", async () => {
  const models = (await client.list()).models;
  const smol = models.find((m) => m.model === `${MODEL}:latest`);
  assert.ok(smol && models.some((m) => m.model === `${EMBED_MODEL}:latest`));
  assert.equal(smol.details.format, "gguf");
  assert.equal(smol.details.quantization_level, "Q4_1");
  const shown = await client.show({ model: MODEL });
  assert.equal(shown.details.family, "llama");
  assert.match(shown.template, /im_start/);
  await client.generate({ model: MODEL, prompt: "Hi", options: { num_predict: 1 } });
  const running = (await client.ps()).models.find((m) => m.model === `${MODEL}:latest`);
  assert.ok(running && running.context_length > 0 && running.expires_at);
});

test("pull reports progress; create, copy, delete", async () => {
  const seen = [];
  const last = await client.pull({ model: `${files.url}/${MODEL_FILE}`, onProgress: (p) => seen.push(p) });
  assert.equal(last.status, "success");
  assert.equal(seen.at(-1), last);
  const total = statSync(join(modelsDir, MODEL_FILE)).size;
  const sized = seen.filter((p) => p.total);
  assert.ok(sized.length > 0 && sized.every((p) => p.total === total));
  assert.equal(sized.at(-1).completed, total);
  const pulled = "smollm2-135m-instruct.q4_1:latest";
  assert.ok((await client.list()).models.some((m) => m.model === pulled));

  const steps = [];
  const created = await client.create({ model: "ts-pirate", from: pulled, system: "You are a pirate.",
    parameters: { temperature: 0, num_predict: 8 }, onProgress: (p) => steps.push(p) });
  assert.equal(created.status, "success");
  assert.equal(steps.at(-1), created);
  assert.equal((await client.show({ model: "ts-pirate" })).system, "You are a pirate.");
  assert.equal((await client.chat({ model: "ts-pirate", messages: HI })).eval_count, 8);

  await client.copy({ source: "ts-pirate", destination: "ts-pirate-2" });
  assert.equal((await client.show({ model: "ts-pirate-2" })).system, "You are a pirate.");
  await client.delete({ model: "ts-pirate-2" });
  await assert.rejects(client.show({ model: "ts-pirate-2" }), { statusCode: 404 });
  await client.delete({ model: "ts-pirate" });
  assert.ok(!(await client.list()).models.some((m) => m.model === "ts-pirate:latest"));
});

test("errors carry the daemon's message", async () => {
  await assert.rejects(client.chat({ model: "no-such-model", messages: HI }), (e) => {
    assert.ok(e instanceof ResponseError);
    assert.equal(e.statusCode, 404);
    assert.equal(e.message, "model 'no-such-model' not found");
    return true;
  });
  await assert.rejects(client.generate({ model: MODEL, prompt: "Hi", stream: true, options: { num_predict: -5 } }),
    (e) => e instanceof ResponseError && e.statusCode === 400 && e.message.includes("num_predict"));
  await assert.rejects(client.delete({ model: "no-such-model" }), { statusCode: 404 });
  // A download that fails after the stream started: an in-band error line.
  const seen = [];
  await assert.rejects(client.pull({ model: `${files.url}/missing.gguf`, onProgress: (p) => seen.push(p) }),
    (e) => e instanceof ResponseError && e.statusCode === -1 && e.message.includes("404"));
  assert.ok(seen.length > 0);
  await assert.rejects(new Client({ host: "127.0.0.1:9" }).version(), /could not connect to mlxr serve/);
});

test("blobs, a folder model from them, and a convert job of it", async () => {
  const files = {};
  for (const name of readdirSync(TINY_FOLDER).sort()) {
    const bytes = readFileSync(join(TINY_FOLDER, name));
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    assert.equal(await client.hasBlob(digest), false);
    const seen = [];
    await client.pushBlob(digest, new Blob([bytes]), { onProgress: (sent, total) => seen.push([sent, total]) });
    assert.deepEqual(seen.at(-1), [bytes.length, bytes.length]);
    assert.equal(await client.hasBlob(digest), true);
    files[name] = digest;
  }
  // Bytes that are not the digest's: the daemon's refusal.
  const wrong = `sha256:${"0".repeat(64)}`;
  await assert.rejects(client.pushBlob(wrong, new Blob(["not those bytes"])), (e) => e instanceof ResponseError && e.statusCode === 400);
  assert.equal(await client.hasBlob(wrong), false);
  assert.equal((await client.create({ model: "sdk-tiny", files })).status, "success");

  let job = await client.startJob({ kind: "convert", model: "sdk-tiny-gguf", from: "sdk-tiny", outtype: "f16", tokenizer_pre: "qwen2" });
  assert.equal(job.kind, "convert");
  assert.equal(job.outtype, "f16");
  while (job.status === "running" || job.status === "registering") {
    await new Promise((r) => setTimeout(r, 50));
    job = await client.getJob(job.id);
  }
  assert.equal(job.status, "success", JSON.stringify(job));
  assert.equal((await client.listJobs())[0].id, job.id);
  assert.ok((await client.list()).models.some((m) => m.name === "sdk-tiny-gguf:latest"));
  assert.equal((await client.show({ model: "sdk-tiny-gguf" })).details.format, "gguf");
  await assert.rejects(client.cancelJob(job.id), (e) => e instanceof ResponseError && e.statusCode === 409);
  await assert.rejects(client.startJob({ kind: "convert", model: "x", from: "no-such-model" }), (e) => e instanceof ResponseError && e.statusCode === 404);
  await assert.rejects(client.getJob("12345"), (e) => e instanceof ResponseError && e.statusCode === 404);
});

test("request reaches routes the client has no method for", async () => {
  const models = await (await client.request("GET", "/v1/models")).json();
  assert.ok(models.data.some((m) => m.id.startsWith(MODEL)));
  const completion = await (
    await client.request("POST", "/v1/completions", { model: MODEL, prompt: "Hi", max_tokens: 2, temperature: 0 })
  ).json();
  assert.equal(completion.usage.completion_tokens, 2);
  await assert.rejects(client.request("POST", "/v1/completions", { model: "no-such-model", prompt: "Hi" }),
    (e) => e instanceof ResponseError && e.statusCode === 404 && e.message.includes("no-such-model"));
  await assert.rejects(new Client({ host: keyed.url }).request("GET", "/v1/models"), { statusCode: 401 });
});

test("API key", async () => {
  await assert.rejects(new Client({ host: keyed.url }).list(), { statusCode: 401 });
  await assert.rejects(new Client({ host: keyed.url, apiKey: "wrong" }).list(), { statusCode: 401 });
  const ok = new Client({ host: keyed.url, apiKey: "sekrit" });
  assert.ok((await ok.list()).models.some((m) => m.model === `${MODEL}:latest`));
  assert.equal((await ok.chat({ model: MODEL, messages: HI, options: { num_predict: 2 } })).eval_count, 2);
});

test("host from MLXR_HOST", async () => {
  const saved = process.env.MLXR_HOST;
  process.env.MLXR_HOST = daemon.url.replace("http://", "");
  try {
    assert.equal(new Client().host, daemon.url);
    assert.ok(await new Client().version());
  } finally {
    if (saved === undefined) delete process.env.MLXR_HOST;
    else process.env.MLXR_HOST = saved;
  }
});

// The same API over `mlxr serve --socket PATH --no-tcp`, through node:http.

/** The daemon's requests running now, from its /metrics. */
async function runningRequests(c) {
  const text = await (await c.request("GET", "/metrics")).text();
  const values = [...text.matchAll(/^mlxr:num_requests_running\{model="[^"]+"\} (\S+)$/gm)].map((m) => Number(m[1]));
  return values.reduce((a, b) => a + b, 0);
}

async function untilNoneRunning(c) {
  const deadline = Date.now() + 10_000;
  while ((await runningRequests(c)) !== 0) {
    assert.ok(Date.now() < deadline, "the abandoned request is still running");
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("Unix socket: the host's spellings, MLXR_HOST, version, list, show, ps", async () => {
  assert.equal(overSocket.host, "http://localhost");
  assert.equal(overSocket.socketPath, unix.socket);
  assert.equal(new Client({ host: `unix://${unix.socket}` }).socketPath, unix.socket);
  assert.throws(() => new Client({ host: "unix:" }), /no socket path/);
  const saved = process.env.MLXR_HOST;
  process.env.MLXR_HOST = `unix:${unix.socket}`;
  try {
    assert.equal(new Client().socketPath, unix.socket);
    assert.equal(await new Client().version(), await client.version());
  } finally {
    if (saved === undefined) delete process.env.MLXR_HOST;
    else process.env.MLXR_HOST = saved;
  }
  const models = (await overSocket.list()).models;
  assert.ok(models.some((m) => m.model === `${MODEL}:latest`) && models.some((m) => m.model === `${EMBED_MODEL}:latest`));
  assert.equal((await overSocket.show({ model: MODEL })).details.family, "llama");
  await overSocket.generate({ model: MODEL, prompt: "Hi", options: { num_predict: 1 } });
  assert.ok((await overSocket.ps()).models.some((m) => m.model === `${MODEL}:latest`));
});

test("Unix socket: a chat stream comes in pieces as they are made, and equals TCP's", async () => {
  const request = { model: MODEL, messages: HI, options: GREEDY };
  const overTcp = await client.chat(request);
  const whole = await overSocket.chat(request);
  assert.equal(whole.eval_count, 24);
  assert.equal(whole.message.content, overTcp.message.content);
  const parts = [];
  for await (const part of await overSocket.chat({ ...request, stream: true })) parts.push(part);
  assert.ok(parts.length > 2);
  assert.equal(parts.filter((p) => p.done).length, 1);
  assert.equal(parts.at(-1).done, true);
  assert.equal(parts.map((p) => p.message.content).join(""), overTcp.message.content);
  // The body reaches its reader as the daemon writes it: its first chunks while the generation runs.
  const response = await overSocket.request("POST", "/api/generate",
    { model: MODEL, prompt: "Count to a thousand:", stream: true, options: { temperature: 0, num_predict: 64 } });
  const reader = response.body.getReader();
  let chunks = 0;
  while (chunks < 3) {
    assert.equal((await reader.read()).done, false);
    chunks++;
  }
  assert.equal(await runningRequests(overSocket), 1);
  while (!(await reader.read()).done) chunks++;
  assert.ok(chunks > 3, `${chunks} chunks`);
});

test("Unix socket: generate, embed", async () => {
  const request = { model: MODEL, prompt: "The capital of France is", options: GREEDY };
  const whole = await overSocket.generate(request);
  assert.equal(whole.response, (await client.generate(request)).response);
  let text = "";
  for await (const part of await overSocket.generate({ ...request, stream: true })) text += part.response;
  assert.equal(text, whole.response);
  const input = ["a cat sits on the mat", "tax law"];
  const embedded = await overSocket.embed({ model: EMBED_MODEL, input });
  assert.equal(embedded.embeddings.length, 2);
  assert.equal(embedded.embeddings[0].length, 384);
  const overTcp = (await client.embed({ model: EMBED_MODEL, input })).embeddings;
  embedded.embeddings.forEach((e, i) => e.forEach((x, j) => assert.ok(Math.abs(x - overTcp[i][j]) < 1e-5)));
});

test("Unix socket: aborting or leaving a stream frees the request; the daemon goes on", async () => {
  const options = { temperature: 0, num_predict: 2000 };
  const controller = new AbortController();
  const stream = await overSocket.generate({ model: MODEL, prompt: "Count to a thousand:", stream: true, signal: controller.signal, options });
  await assert.rejects(async () => {
    let n = 0;
    for await (const part of stream) {
      assert.equal(part.done, false);
      if (++n === 3) {
        assert.equal(await runningRequests(overSocket), 1);
        controller.abort();
      }
    }
  }, { name: "AbortError" });
  await untilNoneRunning(overSocket);
  const metrics = await (await overSocket.request("GET", "/metrics")).text();
  assert.match(metrics, /mlxr:request_success_total\{model="[^"]+",finished_reason="abort"\} [1-9]/);

  let n = 0;
  for await (const part of await overSocket.chat({ model: MODEL, messages: HI, stream: true, options })) {
    assert.equal(part.done, false);
    if (++n === 3) break;
  }
  await untilNoneRunning(overSocket);
  // A signal aborted before the request: no request at all.
  await assert.rejects(overSocket.chat({ model: MODEL, messages: HI, signal: AbortSignal.abort() }), { name: "AbortError" });
  assert.equal((await overSocket.chat({ model: MODEL, messages: HI, options: { num_predict: 2 } })).eval_count, 2);
});

test("Unix socket: pull with progress; create, copy, delete", async () => {
  const seen = [];
  const last = await overSocket.pull({ model: `${files.url}/${MODEL_FILE}`, onProgress: (p) => seen.push(p) });
  assert.equal(last.status, "success");
  const total = statSync(join(modelsDir, MODEL_FILE)).size;
  assert.equal(seen.filter((p) => p.total).at(-1).completed, total);
  const pulled = "smollm2-135m-instruct.q4_1:latest";
  assert.equal((await overSocket.create({ model: "sock-pirate", from: pulled, system: "You are a pirate." })).status, "success");
  await overSocket.copy({ source: "sock-pirate", destination: "sock-pirate-2" });
  assert.equal((await overSocket.show({ model: "sock-pirate-2" })).system, "You are a pirate.");
  await overSocket.delete({ model: "sock-pirate-2" });
  await overSocket.delete({ model: "sock-pirate" });
  const names = (await overSocket.list()).models.map((m) => m.model);
  assert.ok(names.includes(pulled) && !names.some((n) => n.startsWith("sock-pirate")));
});

test("Unix socket: a blob upload goes in pieces, with progress", async () => {
  const bytes = readFileSync(join(TINY_FOLDER, "model.safetensors"));
  const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
  assert.equal(await overSocket.hasBlob(digest), false);
  // Aborted after its first piece: the daemon keeps nothing.
  const controller = new AbortController();
  await assert.rejects(overSocket.pushBlob(digest, new Blob([bytes]), { signal: controller.signal, onProgress: () => controller.abort() }),
    { name: "AbortError" });
  assert.equal(await overSocket.hasBlob(digest), false);
  const seen = [];
  await overSocket.pushBlob(digest, new Blob([bytes]), { onProgress: (sent, total) => seen.push([sent, total]) });
  assert.ok(seen.length > 2, JSON.stringify(seen));
  assert.ok(seen.every(([sent, total], i) => total === bytes.length && sent > (seen[i - 1]?.[0] ?? 0)));
  assert.deepEqual(seen.at(-1), [bytes.length, bytes.length]);
  assert.equal(await overSocket.hasBlob(digest), true);
  const wrong = `sha256:${"0".repeat(64)}`;
  await assert.rejects(overSocket.pushBlob(wrong, new Blob(["not those bytes"])), (e) => e instanceof ResponseError && e.statusCode === 400);
  assert.equal(await overSocket.hasBlob(wrong), false);
});

test("Unix socket: errors carry the daemon's message", async () => {
  await assert.rejects(overSocket.chat({ model: "no-such-model", messages: HI }), (e) => {
    assert.ok(e instanceof ResponseError);
    assert.equal(e.statusCode, 404);
    assert.equal(e.message, "model 'no-such-model' not found");
    return true;
  });
  await assert.rejects(overSocket.generate({ model: MODEL, prompt: "Hi", stream: true, options: { num_predict: -5 } }),
    (e) => e instanceof ResponseError && e.statusCode === 400 && e.message.includes("num_predict"));
  const missing = join(unix.home, "absent.sock");
  await assert.rejects(new Client({ host: `unix:${missing}` }).version(),
    (e) => e.message.startsWith(`could not connect to mlxr serve at unix:${missing}`) && e.message.includes("ENOENT"));
});

test("Unix socket: a fetch of the caller's wins; without Node, a clear refusal", async () => {
  const urls = [];
  const stub = async (url) => {
    urls.push(url);
    return Response.json({ version: "9.9.9" });
  };
  assert.equal(await new Client({ host: "unix:/nowhere.sock", fetch: stub }).version(), "9.9.9");
  assert.deepEqual(urls, ["http://localhost/api/version"]);
  // A browser: no `process`, so no node:http.
  const saved = globalThis.process;
  globalThis.process = undefined;
  try {
    assert.throws(() => new Client({ host: "unix:/run/mlxr.sock" }), /unix:\/run\/mlxr\.sock: a Unix socket needs Node/);
  } finally {
    globalThis.process = saved;
  }
});
