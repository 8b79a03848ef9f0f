import { describe, expect, it } from "vitest";
import { LineSplitter, readNdjson, StreamError } from "./ndjson";

const bytes = (s: string) => new TextEncoder().encode(s);

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      chunks.forEach((chunk) => c.enqueue(chunk));
      c.close();
    },
  });
}

async function collect<T>(gen: AsyncGenerator<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of gen) out.push(v);
  return out;
}

describe("LineSplitter", () => {
  it("joins lines split across chunks", () => {
    const s = new LineSplitter();
    expect(s.push(bytes('{"a":'))).toEqual([]);
    expect(s.push(bytes('1}\n{"b"'))).toEqual(['{"a":1}']);
    expect(s.push(bytes(':2}\n\n{"c":3}\n'))).toEqual(['{"b":2}', '{"c":3}']);
    expect(s.flush()).toEqual([]);
  });

  it("keeps a multi-byte character split between chunks", () => {
    const s = new LineSplitter();
    const all = bytes('{"t":"é✓"}\n');
    expect(s.push(all.slice(0, 7))).toEqual([]);
    expect(s.push(all.slice(7))).toEqual(['{"t":"é✓"}']);
  });

  it("returns a last line without newline on flush", () => {
    const s = new LineSplitter();
    expect(s.push(bytes('{"done":true}'))).toEqual([]);
    expect(s.flush()).toEqual(['{"done":true}']);
  });
});

describe("readNdjson", () => {
  it("parses every line, whatever the chunking", async () => {
    const text = '{"n":1}\n{"n":2}\n{"n":3}';
    const chunks = [...bytes(text)].map((b) => new Uint8Array([b]));
    expect(await collect(readNdjson<{ n: number }>(streamOf(chunks)))).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it("throws an in-band error line", async () => {
    const gen = readNdjson(streamOf([bytes('{"n":1}\n{"error":"model gone"}\n')]));
    await expect(collect(gen)).rejects.toThrow(new StreamError("model gone"));
  });
});
