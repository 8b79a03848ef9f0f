/** The daemon's requests and answers (its Ollama-style `/api/*` JSON). */

/** Model options (`options`): any other key is passed through. */
export interface Options {
  temperature?: number;
  seed?: number;
  num_predict?: number;
  num_ctx?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number;
  stop?: string[];
  repeat_penalty?: number;
  repeat_last_n?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  [option: string]: unknown;
}

export interface ToolCall {
  id?: string;
  function: { index?: number; name: string; arguments: Record<string, unknown> };
}

export interface Message {
  role: "system" | "user" | "assistant" | "tool" | (string & {});
  content: string;
  tool_calls?: ToolCall[];
  /** Tool turns: the function whose result `content` is. */
  tool_name?: string;
  images?: string[];
}

/** A function the model may call. */
export interface Tool {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

interface GenerationFields {
  model: string;
  stream?: boolean;
  options?: Partial<Options>;
  /** `"json"` or a JSON schema the reply must follow. */
  format?: "json" | Record<string, unknown>;
  /** A duration ("5m"), seconds, or a negative number for forever. */
  keep_alive?: string | number;
  /** A Jinja chat template for this request. */
  template?: string;
  logprobs?: boolean;
  top_logprobs?: number;
  /** MLXR's extension: a Lark grammar, or `{type: "regex" | "lark", value}`. */
  grammar?: string | { type: "regex" | "lark"; value: string };
  /** Aborts the request (and a stream: the daemon stops generating). */
  signal?: AbortSignal;
}

export interface ChatRequest extends GenerationFields {
  messages: Message[];
  tools?: Tool[];
}

export interface GenerateRequest extends GenerationFields {
  prompt: string;
  system?: string;
  suffix?: string;
  context?: number[];
  raw?: boolean;
}

interface Timings {
  model: string;
  created_at: string;
  done: boolean;
  done_reason?: string;
  total_duration?: number;
  load_duration?: number;
  prompt_eval_count?: number;
  prompt_eval_duration?: number;
  eval_count?: number;
  eval_duration?: number;
  logprobs?: unknown[];
}

export interface ChatResponse extends Timings {
  message: Message;
}

export interface GenerateResponse extends Timings {
  response: string;
  context?: number[];
}

export interface EmbedRequest {
  model: string;
  input: string | string[];
  truncate?: boolean;
  dimensions?: number;
  keep_alive?: string | number;
}

export interface EmbedResponse {
  model: string;
  embeddings: number[][];
  total_duration?: number;
  load_duration?: number;
  prompt_eval_count?: number;
}

export interface ModelDetails {
  parent_model: string;
  format: string;
  family: string;
  families: string[] | null;
  parameter_size: string;
  quantization_level: string;
}

export interface ModelResponse {
  name: string;
  model: string;
  modified_at: string;
  size: number;
  digest: string;
  details: ModelDetails;
}

export interface ListResponse {
  models: ModelResponse[];
}

export interface RunningModel extends Omit<ModelResponse, "modified_at"> {
  expires_at: string;
  size_vram: number;
  context_length?: number;
  device?: string;
}

export interface ProcessResponse {
  models: RunningModel[];
}

export interface ShowResponse {
  modelfile?: string;
  template?: string;
  parameters?: string;
  system?: string;
  license?: string;
  messages?: Message[];
  details: ModelDetails;
  model_info?: Record<string, unknown>;
  capabilities?: string[];
  modified_at?: string;
  device?: string;
}

/** A line of `pull`'s or `create`'s progress; bytes while they move. */
export interface ProgressResponse {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

export interface PullRequest {
  /** `smollm2:135m`, `hf.co/ORG/REPO[:QUANT]`, an https URL. */
  model: string;
  onProgress?: (progress: ProgressResponse) => void;
  signal?: AbortSignal;
}

export interface CreateRequest {
  model: string;
  /** An existing model to start from. */
  from?: string;
  /** File name -> `sha256:…` digest of an uploaded blob. */
  files?: Record<string, string>;
  template?: string;
  system?: string;
  parameters?: Record<string, unknown>;
  messages?: { role: string; content: string }[];
  license?: string | string[];
  quantize?: string;
  onProgress?: (progress: ProgressResponse) => void;
  signal?: AbortSignal;
}

export interface CopyRequest {
  source: string;
  destination: string;
}

export interface BlobUploadOptions {
  /** Bytes sent of all, as the upload goes (in a browser). */
  onProgress?: (sent: number, total: number) => void;
  signal?: AbortSignal;
}

/** A job's state: `registering` is too late to cancel. */
export type JobStatus = "running" | "registering" | "success" | "error" | "cancelled";

/** A job of the daemon (`/api/mlxr/jobs`): a quantize or a convert into a new model. */
export interface Job {
  id: string;
  kind: "quantize" | "convert";
  /** The new model. */
  model: string;
  /** The type quantized to (quantize jobs). */
  quantize?: string;
  /** The out type (convert jobs: f32, f16, bf16, q8_0 or auto to GGUF; f32, f16 or bf16 to a folder). */
  outtype?: string;
  status: JobStatus;
  /** The run's last progress line: `completed` of `total` tensors while it runs. */
  progress: { status?: string; completed?: number; total?: number };
  error?: string;
  started_at: string;
}

/** What a job makes: a quantized model (`/api/create`'s body), or a converted one (a folder model to GGUF, a GGUF model to a folder). */
export type JobRequest =
  | (Omit<CreateRequest, "onProgress" | "signal"> & { kind?: "quantize"; quantize: string })
  | { kind: "convert"; model: string; from: string; outtype?: string; tokenizer_pre?: string };
