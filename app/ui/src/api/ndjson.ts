/** Splits a byte stream into lines; a line may span several chunks. */
export class LineSplitter {
  private decoder = new TextDecoder();
  private pending = "";

  /** `keepEmpty`: also return blank lines (SSE ends events with one). */
  constructor(private readonly options: { keepEmpty?: boolean } = {}) {}

  /** The complete lines in `chunk` (plus what earlier chunks left over). */
  push(chunk: Uint8Array): string[] {
    this.pending += this.decoder.decode(chunk, { stream: true });
    const lines = this.pending.split("\n");
    this.pending = lines.pop() ?? "";
    return this.options.keepEmpty ? lines : lines.filter((l) => l.trim() !== "");
  }

  /** What is left once the stream ended (a last line without "\n"). */
  flush(): string[] {
    this.pending += this.decoder.decode();
    const rest = this.pending.trim();
    this.pending = "";
    return rest === "" ? [] : [rest];
  }
}

/** An in-band error line (`{"error": "..."}`) after the stream started. */
export class StreamError extends Error {}

/** Parses each NDJSON line of a response body as it arrives. */
export async function* readNdjson<T>(body: ReadableStream<Uint8Array>): AsyncGenerator<T> {
  const reader = body.getReader();
  const splitter = new LineSplitter();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const lines = done ? splitter.flush() : splitter.push(value);
      for (const line of lines) {
        const parsed = JSON.parse(line) as { error?: unknown };
        if (typeof parsed.error === "string") throw new StreamError(parsed.error);
        yield parsed as T;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}
