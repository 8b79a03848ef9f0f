/**
 * A `fetch` over the daemon's Unix socket (`mlxr serve --socket PATH`):
 * `fetch` has no Unix sockets, so each request goes through Node's `node:http`
 * with `socketPath`, and its answer comes back as a WHATWG `Response` whose
 * body streams as the daemon writes it. `node:http` is imported on the first
 * request, so a browser never loads it.
 */
import type { ClientRequest, IncomingMessage } from "node:http";

/** Whether this runtime is Node, or passes for it (`process.versions.node`), so has `node:http`. */
export function isNode(): boolean {
  const process = (globalThis as { process?: { versions?: { node?: unknown } } }).process;
  return typeof process?.versions?.node === "string";
}

/**
 * A `fetch` for this client's requests (a URL, and `init`'s method, headers,
 * body and signal) that reaches the daemon over the socket `path`.
 */
export function unixSocketFetch(path: string): typeof fetch {
  return (input, init) => {
    if (input instanceof Request) throw new TypeError("the Unix socket fetch takes a URL, not a Request");
    return send(path, new URL(input), init ?? {});
  };
}

async function send(socketPath: string, url: URL, init: RequestInit): Promise<Response> {
  const { request } = await import("node:http");
  const signal = init.signal ?? undefined;
  signal?.throwIfAborted();
  const method = (init.method ?? "GET").toUpperCase();
  const headers = Object.fromEntries(new Headers(init.headers));
  const body = bodyOf(init.body);
  // Framed always: node:http sends a DELETE's body unframed unless told its length.
  if (body instanceof Uint8Array) headers["content-length"] = String(body.byteLength);
  else if (body instanceof Blob && !("content-length" in headers)) headers["content-length"] = String(body.size);
  else if (body && !("content-length" in headers)) headers["transfer-encoding"] = "chunked";
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path: url.pathname + url.search, headers });
    const exchange = new Exchange(req, reject, signal);
    req.once("response", (res) => resolve(exchange.response(res, method)));
    writeBody(req, body).catch((e: unknown) => exchange.fail(e));
  });
}

type Body = Uint8Array | Blob | ReadableStream<Uint8Array>;

/** A request body as this transport sends it: bytes at once, a Blob or a stream in pieces. */
function bodyOf(body: RequestInit["body"]): Body | undefined {
  if (body == null) return undefined;
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof Blob || body instanceof ReadableStream) return body;
  throw new TypeError("the Unix socket fetch sends a string, bytes, a Blob or a ReadableStream");
}

/** Statuses whose `Response` must have no body. */
const NULL_BODY = new Set([101, 204, 205, 304]);

/**
 * One request and its answer, ended once: by the body's end, a failure
 * (before the answer: the fetch rejects; after: the body errors), an abort
 * of the signal, or the reader cancelling the body. A failure, an abort and
 * a cancel destroy the socket, so the daemon sees the disconnect and stops.
 */
class Exchange {
  private body?: ReadableStreamDefaultController<Uint8Array>;
  private ended = false;
  private readonly abort = () => this.fail(this.signal?.reason ?? new DOMException("This operation was aborted", "AbortError"));

  constructor(
    private readonly req: ClientRequest,
    private readonly reject: (error: unknown) => void,
    private readonly signal: AbortSignal | undefined,
  ) {
    // As undici's fetch fails to connect: a TypeError whose cause says why (ENOENT, ECONNREFUSED).
    req.on("error", (e) => this.fail(this.body ? e : new TypeError("fetch failed", { cause: e })));
    signal?.addEventListener("abort", this.abort, { once: true });
  }

  response(res: IncomingMessage, method: string): Response {
    const init = { status: res.statusCode, statusText: res.statusMessage, headers: headersOf(res) };
    if (method === "HEAD" || NULL_BODY.has(res.statusCode ?? 0)) {
      res.once("end", () => this.end()).resume();
      return new Response(null, init);
    }
    return new Response(this.stream(res), init);
  }

  fail(error: unknown): void {
    if (!this.finish()) return;
    if (this.body) this.body.error(error);
    else this.reject(error);
    this.req.destroy();
  }

  private end(): void {
    if (this.finish()) this.body?.close();
  }

  /** Whether this call ends the exchange (the first does). */
  private finish(): boolean {
    if (this.ended) return false;
    this.ended = true;
    this.signal?.removeEventListener("abort", this.abort);
    return true;
  }

  /** The response's bytes as they arrive, paused while the reader is behind. */
  private stream(res: IncomingMessage): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.body = controller;
        res.on("data", (chunk: Uint8Array) => {
          if (this.ended) return;
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) res.pause();
        });
        res.on("error", (e) => this.fail(e));
        res.once("end", () => this.end());
        res.once("close", () => {
          if (!res.complete) this.fail(new TypeError("the daemon closed the connection mid-response"));
        });
      },
      pull: () => void res.resume(),
      cancel: () => {
        if (this.finish()) this.req.destroy();
      },
    });
  }
}

function headersOf(res: IncomingMessage): Headers {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] ?? "", raw[i + 1] ?? "");
  return headers;
}

/** Sends `body`: bytes at once, a Blob or a stream in pieces as the socket takes them. */
async function writeBody(req: ClientRequest, body: Body | undefined): Promise<void> {
  if (body === undefined || body instanceof Uint8Array) return void req.end(body);
  const reader = (body instanceof Blob ? body.stream() : body).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return void req.end();
      if (req.destroyed) return;
      if (!req.write(value)) await drained(req);
    }
  } finally {
    if (req.destroyed) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** Until the socket takes more, or the request is gone (aborted, refused). */
function drained(req: ClientRequest): Promise<void> {
  return new Promise((resume) => {
    const go = () => {
      req.off("drain", go);
      req.off("close", go);
      resume();
    };
    req.once("drain", go);
    req.once("close", go);
  });
}
