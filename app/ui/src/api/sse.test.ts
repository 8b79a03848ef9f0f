import { describe, expect, it } from "vitest";
import { readSse, SseParser } from "./sse";

function body(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(c) {
      chunks.forEach((s) => c.enqueue(encoder.encode(s)));
      c.close();
    },
  });
}

describe("SSE", () => {
  it("parses events split across chunks, with CRLF, comments and multi-line data", async () => {
    const events = [];
    for await (const e of readSse(body(["event: log\r\nid: 7\r\nda", "ta: {\"a\":1}\r\n\r\n: ping\n\n", "data: x\ndata: y\n"]))) {
      events.push(e);
    }
    expect(events).toEqual([
      { event: "log", id: "7", data: '{"a":1}' },
      { event: "message", id: "7", data: "x\ny" },
    ]);
  });

  it("ignores events without data", () => {
    const p = new SseParser();
    expect(p.line("event: skipped")).toBeNull();
    expect(p.line("")).toBeNull();
    expect(p.line("data")).toBeNull();
    expect(p.line("")).toEqual({ event: "message", id: null, data: "" });
  });
});
