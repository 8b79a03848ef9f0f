import { readApiKey } from "../lib/apiKey";

/** A failed API call, with a message fit to show to the user. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** `fetch` with the API key and readable errors; the response is ok. */
export async function apiFetch(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const key = readApiKey();
  if (key) headers.set("Authorization", `Bearer ${key}`);
  if (init.body !== undefined && !headers.has("Content-Type")) {
    headers.set("Content-Type", "application/json");
  }
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers });
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new ApiError(`Cannot reach the MLXR daemon (${describe(e)}). Is \`mlxr serve\` running?`);
  }
  if (!response.ok) throw new ApiError(await errorMessage(response), response.status);
  return response;
}

/** POST `body` as JSON and parse the JSON answer. */
export async function postJson<T>(path: string, body: unknown, init: RequestInit = {}): Promise<T> {
  const response = await apiFetch(path, { ...init, method: "POST", body: JSON.stringify(body) });
  return (await response.json()) as T;
}

export async function getJson<T>(path: string): Promise<T> {
  return (await (await apiFetch(path)).json()) as T;
}

/** An aborted fetch or stream read (by name: DOMException differs across realms). */
export function isAbort(e: unknown): boolean {
  return typeof e === "object" && e !== null && (e as { name?: unknown }).name === "AbortError";
}

export function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The message of an Ollama (`{"error": "..."}`) or OpenAI (`{"error": {"message"}}`) error. */
async function errorMessage(response: Response): Promise<string> {
  const prefix = `${response.status} ${response.statusText}`.trim();
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { error?: string | { message?: string } };
    const message = typeof body.error === "string" ? body.error : body.error?.message;
    if (message) return `${prefix}: ${message}`;
  } catch {
    // not JSON: fall through to the raw text
  }
  if (response.status === 401) return `${prefix}: set the API key in the header`;
  return text.trim() ? `${prefix}: ${text.trim().slice(0, 300)}` : prefix;
}
