import { readSse } from "mlxr";
import { apiFetch, getJson } from "./client";

/** `GET /api/mlxr/config`: sections of settings (see crates/mlxr-server/src/admin.rs). */
export type ServerConfig = Record<string, unknown>;

export function getConfig(): Promise<ServerConfig> {
  return getJson<ServerConfig>("/api/mlxr/config");
}

export interface LogLine {
  seq: number;
  time: string;
  level: "ERROR" | "WARN" | "INFO" | "DEBUG" | "TRACE";
  target: string;
  message: string;
}

/** What the log stream sends: a line, or how many lines this reader missed. */
export type LogItem = { kind: "line"; line: LogLine } | { kind: "skipped"; count: number };

/**
 * Follows `GET /api/mlxr/logs` (SSE read with fetch, so the API key header
 * is sent: EventSource cannot send one): the last `tail` lines, then live ones.
 */
export async function* followLogs(tail: number, signal: AbortSignal): AsyncGenerator<LogItem> {
  const response = await apiFetch(`/api/mlxr/logs?tail=${tail}`, { signal });
  if (!response.body) throw new Error("/api/mlxr/logs: the response has no body");
  for await (const event of readSse(response.body)) {
    if (event.event === "log") yield { kind: "line", line: JSON.parse(event.data) as LogLine };
    else if (event.event === "skipped") yield { kind: "skipped", count: Number(event.data) };
  }
}

/** `PATCH /api/mlxr/config`: only `keep_alive` (e.g. "10m", "1h", "0", "-1") may change; answers the new configuration. */
export async function updateConfig(update: { keep_alive: string }): Promise<ServerConfig> {
  const response = await apiFetch("/api/mlxr/config", { method: "PATCH", body: update });
  return (await response.json()) as ServerConfig;
}
