import { readNdjson } from "mlxr";
import { apiFetch, getJson, postJson } from "./client";

export interface ModelDetails {
  format?: string;
  family?: string;
  families?: string[] | null;
  parameter_size?: string;
  quantization_level?: string;
}

export interface ModelSummary {
  name: string;
  model: string;
  modified_at: string;
  size: number;
  digest: string;
  details: ModelDetails;
}

export interface ShowResponse {
  details?: ModelDetails;
  parameters?: string;
  template?: string;
  modelfile?: string;
  system?: string;
  license?: string;
  model_info?: Record<string, unknown>;
}

/** A function the model may call (Ollama `tools`). */
export interface ToolDefinition {
  type: "function";
  function: { name: string; description?: string; parameters?: unknown };
}

export interface ToolCall {
  id?: string;
  function: { index?: number; name: string; arguments: Record<string, unknown> | string };
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** Assistant turns: the calls the model made. */
  tool_calls?: ToolCall[];
  /** Tool turns: the function whose result `content` is. */
  tool_name?: string;
}

/** Ollama `options` the chat page sets; absent = the model's default. */
export interface ChatOptions {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  num_predict?: number;
  seed?: number;
}

export interface ChatChunk {
  message?: { role: string; content: string; tool_calls?: ToolCall[] };
  done: boolean;
  done_reason?: string;
  eval_count?: number;
  eval_duration?: number;
  prompt_eval_count?: number;
}

export interface PullProgress {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

export async function listModels(): Promise<ModelSummary[]> {
  return (await getJson<{ models: ModelSummary[] }>("/api/tags")).models;
}

export function showModel(model: string): Promise<ShowResponse> {
  return postJson<ShowResponse>("/api/show", { model });
}

export async function deleteModel(model: string): Promise<void> {
  await apiFetch("/api/delete", { method: "DELETE", body: JSON.stringify({ model }) });
}

export async function copyModel(source: string, destination: string): Promise<void> {
  await apiFetch("/api/copy", { method: "POST", body: JSON.stringify({ source, destination }) });
}

async function streamPost<T>(path: string, body: unknown, signal: AbortSignal): Promise<AsyncGenerator<T>> {
  const response = await apiFetch(path, { method: "POST", body: JSON.stringify(body), signal });
  if (!response.body) throw new Error(`${path}: the response has no body`);
  return readNdjson<T>(response.body);
}

export function streamChat(
  request: { model: string; messages: ChatMessage[]; options: ChatOptions; tools?: ToolDefinition[] },
  signal: AbortSignal,
): Promise<AsyncGenerator<ChatChunk>> {
  return streamPost<ChatChunk>("/api/chat", { ...request, stream: true }, signal);
}

export function streamPull(model: string, signal: AbortSignal): Promise<AsyncGenerator<PullProgress>> {
  return streamPost<PullProgress>("/api/pull", { model, stream: true }, signal);
}
