/** Server-Sent Events over a `fetch` body (the OpenAI-style /v1 streams and
 * /api/mlxr/logs, which the web UI follows with it). */
import { LineSplitter } from "./ndjson.js";

/** One Server-Sent Event: its `event` name (default "message"), `id` and `data`. */
export interface SseEvent {
  event: string;
  id: string | null;
  data: string;
}

/**
 * Collects SSE fields into events; an empty line ends an event. Lines may
 * end in "\n" or "\r\n"; comments (":" lines, e.g. keep-alives) are skipped.
 */
export class SseParser {
  private event = "message";
  private id: string | null = null;
  private data: string[] = [];

  /** Feeds one line (without its newline); returns the event it completes, if any. */
  line(raw: string): SseEvent | null {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "id") this.id = value;
    else if (field === "data") this.data.push(value);
    return null;
  }

  private dispatch(): SseEvent | null {
    const done = this.data.length ? { event: this.event, id: this.id, data: this.data.join("\n") } : null;
    this.event = "message";
    this.data = [];
    return done;
  }
}

/** The events of an SSE response body as they arrive. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const splitter = new LineSplitter({ keepEmpty: true });
  const parser = new SseParser();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const lines = done ? [...splitter.flush(), ""] : splitter.push(value);
      for (const line of lines) {
        const event = parser.line(line);
        if (event) yield event;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}
