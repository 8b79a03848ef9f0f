import { readNdjson, type Options, type Tool as ToolDefinition, type ToolCall } from "mlxr";
import { client } from "./client";

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
  /** `completion`, `embedding`, `tools`, ... */
  capabilities?: string[];
}

/** A function the model may call (Ollama `tools`). */
export type { Tool as ToolDefinition } from "mlxr";

/** A call the model made; its arguments are an object, as Ollama sends them. */
export type { ToolCall } from "mlxr";

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** Assistant turns: the calls the model made. */
  tool_calls?: ToolCall[];
  /** Tool turns: the function whose result `content` is. */
  tool_name?: string;
}

/** Ollama `options` the chat page sets; absent = the model's default. */
export type ChatOptions = Pick<Options, "temperature" | "top_p" | "top_k" | "num_predict" | "seed">;

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
  return (await client().list()).models;
}

export function showModel(model: string): Promise<ShowResponse> {
  return client().show({ model });
}

export function deleteModel(model: string): Promise<void> {
  return client().delete({ model });
}

export function copyModel(source: string, destination: string): Promise<void> {
  return client().copy({ source, destination });
}

export async function streamChat(
  request: { model: string; messages: ChatMessage[]; options: ChatOptions; tools?: ToolDefinition[] },
  signal: AbortSignal,
): Promise<AsyncGenerator<ChatChunk>> {
  return client().chat({ ...request, stream: true, signal });
}

export async function streamPull(model: string, signal: AbortSignal): Promise<AsyncGenerator<PullProgress>> {
  const response = await client().request("POST", "/api/pull", { model, stream: true }, signal);
  if (!response.body) throw new Error("/api/pull: the response has no body");
  return readNdjson<PullProgress>(response.body);
}
