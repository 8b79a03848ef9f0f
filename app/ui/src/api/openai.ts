import { postJson } from "./client";

/** The legacy completions `logprobs` object: one entry per generated token. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  /** The most likely tokens at each step, token -> logprob. */
  top_logprobs: Record<string, number>[];
  text_offset: number[];
}

export interface CompletionRequest {
  model: string;
  prompt: string;
  max_tokens: number;
  temperature: number;
  /** How many alternatives per token (0-20). */
  logprobs: number;
  seed?: number;
  response_format?: { type: "json_schema"; json_schema: { name: string; schema: unknown } };
  /** MLXR's extension: constrain the text to a regular expression or a Lark grammar. */
  grammar?: { type: "regex" | "lark"; value: string };
}

export interface CompletionResponse {
  choices: { text: string; finish_reason: string | null; logprobs: CompletionLogprobs | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number };
}

export function complete(request: CompletionRequest, signal?: AbortSignal): Promise<CompletionResponse> {
  return postJson<CompletionResponse>("/v1/completions", { ...request, stream: false }, signal);
}

export interface EmbeddingsResponse {
  data: { index: number; embedding: number[] }[];
  model: string;
}

/** One vector per text, in the order of `input`. */
export async function embed(model: string, input: string[]): Promise<number[][]> {
  const response = await postJson<EmbeddingsResponse>("/v1/embeddings", { model, input });
  return [...response.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
}
