import { ResponseError } from "./errors.js";
import { errorText, readNdjson } from "./ndjson.js";
import { isNode, unixSocketFetch } from "./socket.js";
import { sendWithProgress, type Sent } from "./upload.js";
import type {
  BlobUploadOptions,
  ChatRequest,
  ChatResponse,
  CopyRequest,
  CreateRequest,
  EmbedRequest,
  EmbedResponse,
  GenerateRequest,
  GenerateResponse,
  Job,
  JobRequest,
  ListResponse,
  ProcessResponse,
  ProgressResponse,
  PullRequest,
  ShowResponse,
} from "./types.js";

/** Where `mlxr serve` listens unless `--host` says otherwise. */
export const DEFAULT_HOST = "127.0.0.1:11435";

export interface ClientOptions {
  /**
   * `host:port`, a URL, or `unix:PATH` (also `unix://PATH`: the daemon's
   * `--socket`, reached through Node's `node:http`); default `MLXR_HOST` (in
   * Node), else 127.0.0.1:11435. In a browser page served by the daemon, `""`
   * is the page's own origin.
   */
  host?: string;
  /** Sent as `Authorization: Bearer KEY`; default `MLXR_API_KEY` in Node. */
  apiKey?: string;
  /** Another `fetch` (a proxy, a test double); it wins over the Unix socket's too. */
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}

function env(name: string): string | undefined {
  const process = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return process?.env?.[name] || undefined;
}

/**
 * A host as the `mlxr` CLI reads it: `host:port`, a URL, or `unix:PATH`
 * (also `unix://PATH`). Returns the base URL and the socket's path, if any.
 */
function parseHost(host: string): { url: string; socketPath?: string } {
  if (host.startsWith("unix:")) {
    const path = host.slice("unix:".length).replace(/^\/\//, "");
    if (path === "") throw new TypeError(`${host}: no socket path (unix:/path/to/mlxr.sock)`);
    return { url: "http://localhost", socketPath: path };
  }
  host = host.replace(/\/+$/, "");
  return { url: host === "" || /^https?:\/\//.test(host) ? host : `http://${host}` };
}

/** The `fetch` that reaches the socket at `path`, in Node; elsewhere a clear refusal. */
function socketFetch(path: string): typeof fetch {
  if (!isNode()) {
    throw new TypeError(`unix:${path}: a Unix socket needs Node (node:http); in a browser, reach the daemon over TCP (host:port or a URL)`);
  }
  return unixSocketFetch(path);
}

type Stream<T> = AsyncGenerator<T, void, undefined>;

/**
 * A client of a running `mlxr serve`, over its Ollama-style `/api/*` routes.
 *
 * ```ts
 * import { Client } from "mlxr";
 * const client = new Client();             // MLXR_HOST, else 127.0.0.1:11435
 * const r = await client.chat({ model: "smollm2", messages: [{ role: "user", content: "Hi" }] });
 * console.log(r.message.content);
 * for await (const part of await client.generate({ model: "smollm2", prompt: "Hi", stream: true })) {
 *   process.stdout.write(part.response);
 * }
 * ```
 */
export class Client {
  /** The base URL of every request (`http://localhost` over a Unix socket). */
  readonly host: string;
  /** The daemon's Unix socket, for a `unix:PATH` host. */
  readonly socketPath?: string;
  private readonly fetch: typeof fetch;
  /** Whether `fetch` sends a stream body piece by piece (the socket's does), so uploads can report progress. */
  private readonly streamsUploads: boolean;
  private readonly headers: Record<string, string>;

  constructor(options: ClientOptions = {}) {
    const { url, socketPath } = parseHost(options.host ?? env("MLXR_HOST") ?? DEFAULT_HOST);
    this.host = url;
    this.socketPath = socketPath;
    // A fetch of the caller's wins, over the socket too (it gets http://localhost URLs).
    this.streamsUploads = socketPath !== undefined && !options.fetch;
    this.fetch = options.fetch ?? (socketPath !== undefined ? socketFetch(socketPath) : globalThis.fetch.bind(globalThis));
    const apiKey = options.apiKey ?? env("MLXR_API_KEY");
    this.headers = { Accept: "application/json", ...options.headers };
    if (apiKey) this.headers.Authorization = `Bearer ${apiKey}`;
  }

  /**
   * Any route of the daemon (`/v1/*`, `/api/mlxr/*`, `/metrics`, ...) with
   * this client's host, key and errors: `body` is sent as JSON; a non-2xx
   * answer throws a ResponseError with the daemon's message.
   */
  async request(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    const headers = { ...this.headers };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetch(`${this.host}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      throw this.unreachable(e);
    }
    if (!response.ok) throw refusal(response.status, await response.text().catch(() => ""));
    return response;
  }

  /** A failed connection as the user reads it (an abort as it is). */
  private unreachable(e: unknown): unknown {
    if ((e as { name?: string }).name === "AbortError") return e;
    const cause = e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e);
    const where = this.socketPath !== undefined ? `unix:${this.socketPath}` : this.host || "this page's origin";
    return new Error(`could not connect to mlxr serve at ${where} (start it with \`mlxr serve\`): ${cause}`, {
      cause: e,
    });
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await (await this.request(method, path, body)).json()) as T;
  }

  private async stream<T>(path: string, body: object, signal?: AbortSignal): Promise<Stream<T>> {
    const response = await this.request("POST", path, body, signal);
    if (!response.body) throw new ResponseError(-1, `${path}: the response has no body`);
    return readNdjson<T>(response.body);
  }

  /** Streams progress lines to `onProgress`; resolves with the last one. */
  private async progress(path: string, body: object, request: { onProgress?: (p: ProgressResponse) => void; signal?: AbortSignal }): Promise<ProgressResponse> {
    let last: ProgressResponse | undefined;
    for await (const line of await this.stream<ProgressResponse>(path, { ...body, stream: true }, request.signal)) {
      last = line;
      request.onProgress?.(line);
    }
    if (!last) throw new ResponseError(-1, `${path}: the stream ended without a status`);
    return last;
  }

  /**
   * A reply to `messages` (`POST /api/chat`); with `stream: true`, an async
   * iterator of pieces (the last has `done: true`, the reason and counts).
   * Breaking out of the loop stops the generation.
   */
  chat(request: ChatRequest & { stream: true }): Promise<Stream<ChatResponse>>;
  chat(request: ChatRequest & { stream?: false }): Promise<ChatResponse>;
  chat(request: ChatRequest): Promise<ChatResponse | Stream<ChatResponse>>;
  async chat(request: ChatRequest): Promise<ChatResponse | Stream<ChatResponse>> {
    const { signal, ...body } = request;
    if (body.stream) return this.stream<ChatResponse>("/api/chat", body, signal);
    return (await (await this.request("POST", "/api/chat", { ...body, stream: false }, signal)).json()) as ChatResponse;
  }

  /** A completion of `prompt` (`POST /api/generate`); see `chat` for streams. */
  generate(request: GenerateRequest & { stream: true }): Promise<Stream<GenerateResponse>>;
  generate(request: GenerateRequest & { stream?: false }): Promise<GenerateResponse>;
  generate(request: GenerateRequest): Promise<GenerateResponse | Stream<GenerateResponse>>;
  async generate(request: GenerateRequest): Promise<GenerateResponse | Stream<GenerateResponse>> {
    const { signal, ...body } = request;
    if (body.stream) return this.stream<GenerateResponse>("/api/generate", body, signal);
    return (await (await this.request("POST", "/api/generate", { ...body, stream: false }, signal)).json()) as GenerateResponse;
  }

  /** Embeddings of one text or several (`POST /api/embed`), L2-normalized. */
  embed(request: EmbedRequest): Promise<EmbedResponse> {
    return this.json("POST", "/api/embed", request);
  }

  /** The models the daemon can serve (`GET /api/tags`). */
  list(): Promise<ListResponse> {
    return this.json("GET", "/api/tags");
  }

  /** The models loaded now (`GET /api/ps`). */
  ps(): Promise<ProcessResponse> {
    return this.json("GET", "/api/ps");
  }

  /** A model's Modelfile, template, parameters and metadata (`POST /api/show`). */
  show(request: { model: string }): Promise<ShowResponse> {
    return this.json("POST", "/api/show", request);
  }

  /**
   * Pulls a model into the daemon's registry (`POST /api/pull`);
   * `onProgress` gets each line (`status`, and `completed` of `total` bytes).
   * Resolves with the last line (`status: "success"`); a failed download
   * rejects with a ResponseError.
   */
  pull(request: PullRequest): Promise<ProgressResponse> {
    const { onProgress, signal, ...body } = request;
    return this.progress("/api/pull", body, { onProgress, signal });
  }

  /** Creates a model from another (`from`) or from blobs (`files`) (`POST /api/create`). */
  create(request: CreateRequest): Promise<ProgressResponse> {
    const { onProgress, signal, ...body } = request;
    return this.progress("/api/create", body, { onProgress, signal });
  }

  /** Copies a registry model under a new name (`POST /api/copy`). */
  async copy(request: CopyRequest): Promise<void> {
    await this.request("POST", "/api/copy", request);
  }

  /** Deletes a registry model (`DELETE /api/delete`). */
  async delete(request: { model: string }): Promise<void> {
    await this.request("DELETE", "/api/delete", request);
  }

  /** Whether the daemon holds the blob `digest` (`sha256:…`; `HEAD /api/blobs/DIGEST`). */
  async hasBlob(digest: string): Promise<boolean> {
    try {
      await this.request("HEAD", `/api/blobs/${encodeURIComponent(digest)}`);
      return true;
    } catch (e) {
      if (e instanceof ResponseError && e.statusCode === 404) return false;
      throw e;
    }
  }

  /**
   * Uploads `data` as the blob `digest` (`POST /api/blobs/DIGEST`; the daemon
   * checks the bytes against it), for `create`'s `files`. `onProgress` gets
   * the bytes sent as they go in a browser and over a Unix socket, once at
   * the end elsewhere.
   */
  async pushBlob(digest: string, data: Blob, options: BlobUploadOptions = {}): Promise<void> {
    const url = `${this.host}/api/blobs/${encodeURIComponent(digest)}`;
    const headers = { ...this.headers, "Content-Type": "application/octet-stream" };
    let sent: Sent;
    try {
      sent = await sendWithProgress(url, headers, data, options.onProgress ?? (() => undefined), options.signal, {
        fetch: this.fetch,
        streamsBodies: this.streamsUploads,
      });
    } catch (e) {
      throw this.unreachable(e);
    }
    if (sent.status < 200 || sent.status >= 300) throw refusal(sent.status, sent.text);
  }

  /**
   * Starts a job of the daemon (`POST /api/mlxr/jobs`): a quantize
   * (`/api/create`'s body with `quantize`) or a convert (`kind: "convert"`,
   * `outtype`: a folder model to GGUF, a GGUF model to a folder). Bad
   * requests reject before a job starts.
   */
  startJob(request: JobRequest): Promise<Job> {
    return this.json("POST", "/api/mlxr/jobs", request);
  }

  /** One job, with its last progress line (`GET /api/mlxr/jobs/ID`). */
  getJob(id: string): Promise<Job> {
    return this.json("GET", `/api/mlxr/jobs/${encodeURIComponent(id)}`);
  }

  /** This daemon's jobs, newest first (`GET /api/mlxr/jobs`). */
  async listJobs(): Promise<Job[]> {
    return (await this.json<{ jobs: Job[] }>("GET", "/api/mlxr/jobs")).jobs;
  }

  /** Cancels a running job: nothing is registered (`DELETE /api/mlxr/jobs/ID`; 409 once it has finished). */
  cancelJob(id: string): Promise<Job> {
    return this.json("DELETE", `/api/mlxr/jobs/${encodeURIComponent(id)}`);
  }

  /** The daemon's version (`GET /api/version`). */
  async version(): Promise<string> {
    return (await this.json<{ version: string }>("GET", "/api/version")).version;
  }
}

/** A refusal of the daemon: its `{"error": …}` message, else the text. */
function refusal(status: number, text: string): ResponseError {
  let message = text.trim() || `HTTP ${status}`;
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (parsed.error !== undefined) message = errorText(parsed.error);
  } catch {
    // not JSON: the text itself
  }
  return new ResponseError(status, message);
}
