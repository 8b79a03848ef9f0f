/**
 * NDJSON over a `fetch` body: the daemon's `/api/*` streams, one JSON object
 * a line. The web UI (app/ui) reads its streams with these too.
 */
import { ResponseError } from "./errors.js";

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

/**
 * Parses each NDJSON line of a response body as it arrives. An in-band
 * `{"error": "..."}` line (the stream had started) throws a ResponseError
 * with status -1. Leaving the loop early cancels the body, and the daemon
 * aborts the request.
 */
export async function* readNdjson<T>(body: ReadableStream<Uint8Array>): AsyncGenerator<T> {
  const reader = body.getReader();
  const splitter = new LineSplitter();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const lines = done ? splitter.flush() : splitter.push(value);
      for (const line of lines) {
        const parsed = JSON.parse(line) as { error?: unknown };
        if (parsed.error !== undefined) throw new ResponseError(-1, errorText(parsed.error));
        yield parsed as T;
      }
      if (done) {
        finished = true;
        return;
      }
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** The message of an Ollama (`"..."`) or OpenAI (`{"message": ...}`) `error`. */
export function errorText(error: unknown): string {
  if (typeof error === "string") return error;
  if (error && typeof error === "object" && typeof (error as { message?: unknown }).message === "string") {
    return (error as { message: string }).message;
  }
  return JSON.stringify(error);
}
