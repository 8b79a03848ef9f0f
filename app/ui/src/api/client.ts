import { Client, ResponseError } from "mlxr";
import { readApiKey } from "../lib/apiKey";

/**
 * The SDK's client of the daemon that served this page (its own origin),
 * with the API key the user set in the header, read at each call.
 */
export function client(): Client {
  return new Client({ host: "", apiKey: readApiKey() || undefined });
}

/** A route the SDK has no method for: the response, ok (else a ResponseError with the daemon's message). */
export function apiFetch(
  path: string,
  init: { method?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<Response> {
  return client().request(init.method ?? "GET", path, init.body, init.signal);
}

/** POST `body` as JSON and parse the JSON answer. */
export async function postJson<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
  return (await (await apiFetch(path, { method: "POST", body, signal })).json()) as T;
}

export async function getJson<T>(path: string): Promise<T> {
  return (await (await apiFetch(path)).json()) as T;
}

/** An aborted fetch or stream read (by name: DOMException differs across realms). */
export function isAbort(e: unknown): boolean {
  return typeof e === "object" && e !== null && (e as { name?: unknown }).name === "AbortError";
}

/** An error as the user reads it: the daemon's refusals with their HTTP status. */
export function describe(e: unknown): string {
  if (e instanceof ResponseError && e.statusCode > 0) return `HTTP ${e.statusCode}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
