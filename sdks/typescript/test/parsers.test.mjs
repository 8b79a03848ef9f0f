// The stream parsers (NDJSON, SSE) on hand-made bodies: chunks split
// anywhere, multi-byte characters, CRLF, comments, in-band errors. The web
// UI (app/ui) imports these parsers, so these are its tests of them too.
import assert from "node:assert/strict";
import { test } from "node:test";

import { LineSplitter, ResponseError, SseParser, readNdjson, readSse } from "../dist/index.js";

const bytes = (s) => new TextEncoder().encode(s);
const streamOf = (chunks) => new ReadableStream({
  start(c) {
    chunks.forEach((chunk) => c.enqueue(typeof chunk === "string" ? bytes(chunk) : chunk));
    c.close();
  },
});
const collect = async (gen) => {
  const out = [];
  for await (const v of gen) out.push(v);
  return out;
};

test("LineSplitter joins lines split across chunks and keeps split characters", () => {
  const s = new LineSplitter();
  assert.deepEqual(s.push(bytes('{"a":')), []);
  assert.deepEqual(s.push(bytes('1}\n{"b"')), ['{"a":1}']);
  assert.deepEqual(s.push(bytes(':2}\n\n{"c":3}\n')), ['{"b":2}', '{"c":3}']);
  assert.deepEqual(s.flush(), []);
  const all = bytes('{"t":"é✓"}\n');
  assert.deepEqual(s.push(all.slice(0, 7)), []);
  assert.deepEqual(s.push(all.slice(7)), ['{"t":"é✓"}']);
  assert.deepEqual(s.push(bytes('{"done":true}')), []);
  assert.deepEqual(s.flush(), ['{"done":true}']);
});

test("readNdjson parses every line, whatever the chunking", async () => {
  const chunks = [...bytes('{"n":1}\n{"n":2}\n{"n":3}')].map((b) => new Uint8Array([b]));
  assert.deepEqual(await collect(readNdjson(streamOf(chunks))), [{ n: 1 }, { n: 2 }, { n: 3 }]);
});

test("readNdjson throws an in-band error line as a ResponseError", async () => {
  await assert.rejects(collect(readNdjson(streamOf(['{"n":1}\n{"error":"model gone"}\n']))),
    (e) => e instanceof ResponseError && e.statusCode === -1 && e.message === "model gone");
});

test("readSse: events split across chunks, CRLF, comments, multi-line data", async () => {
  const events = await collect(readSse(streamOf(["event: log\r\nid: 7\r\nda", 'ta: {"a":1}\r\n\r\n: ping\n\n', "data: x\ndata: y\n"])));
  assert.deepEqual(events, [
    { event: "log", id: "7", data: '{"a":1}' },
    { event: "message", id: "7", data: "x\ny" },
  ]);
  const p = new SseParser();
  assert.equal(p.line("event: skipped"), null);
  assert.equal(p.line(""), null);
  assert.equal(p.line("data"), null);
  assert.deepEqual(p.line(""), { event: "message", id: null, data: "" });
});
