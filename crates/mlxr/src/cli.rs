//! Command-line syntax. Kept apart from what the commands do.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use mlxr_engine::{KvBudget, KvDtype};

#[derive(Parser, Debug)]
#[command(
    name = "mlxr",
    version,
    about = "Run large language models locally (GGUF on the CPU).",
    after_help = "Examples:
  mlxr run -m ~/.cache/mlxr/models/SmolLM2-135M-Instruct.Q4_1.gguf
  mlxr run -m model.gguf \"Why is the sky blue?\" --verbose
  mlxr generate -m model.gguf --raw -n 32 --temperature 0 \"The capital of France is\"
  mlxr tokenize -m model.gguf --pieces \"Hello, world!\""
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Chat with a model: one reply to PROMPT, or an interactive chat without it.
    #[command(after_help = "Examples:
  mlxr run -m SmolLM2-135M-Instruct.Q4_1.gguf               interactive chat (/bye or Ctrl-D to leave)
  mlxr run -m SmolLM2-135M-Instruct.Q4_1.gguf \"Hi there\"    one reply, then exit
  mlxr run -m model.gguf --verbose --temperature 0 \"2+2=\"   with timings

In a chat, Ctrl-C stops the current reply; /bye or Ctrl-D leaves.")]
    Run(RunArgs),
    /// Complete a prompt (chat-templated unless --raw) and print the result.
    #[command(after_help = "Examples:
  mlxr generate -m model.gguf \"Write a haiku about rust\"
  mlxr generate -m model.gguf --raw -n 32 --temperature 0 \"def fib(n):\"
  mlxr generate -m model.gguf --raw --json --logprobs 3 -n 8 \"Once upon a time\"

--json prints one object: {\"text\", \"tokens\", \"prompt_tokens\", \"finish_reason\",
\"logprobs\" (with --logprobs), \"timings\": {\"prompt_n\", \"prompt_ms\", \"predicted_n\", \"predicted_ms\"}}.")]
    Generate(GenerateArgs),
    /// Print the token ids a model sees for TEXT (as a raw prompt) as a JSON array.
    #[command(after_help = "Examples:
  mlxr tokenize -m model.gguf \"Hello, world!\"            [1, 19556, 28, 905, 17]
  mlxr tokenize -m model.gguf --pieces \"Hello\"           [{\"id\": 19556, \"piece\": \"Hello\"}]")]
    Tokenize(TokenizeArgs),
    /// Serve models over OpenAI- and Ollama-compatible HTTP APIs.
    #[command(after_help = "Examples:
  mlxr serve                                        models from the registry (MLXR_HOME, default ~/.mlxr)
  mlxr serve -m SmolLM2-135M-Instruct.Q4_1.gguf     also serve this file (as \"smollm2-135m-instruct.q4_1\")
  mlxr serve -m model.gguf --name smollm2 --host 0.0.0.0:8080 --api-key secret
  curl http://127.0.0.1:11435/v1/chat/completions -d '{\"model\":\"smollm2\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'

Environment: MLXR_HOST, MLXR_HOME, MLXR_API_KEY, MLXR_KEEP_ALIVE, MLXR_ORIGINS (comma-separated).")]
    Serve(ServeArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on, host:port.
    #[arg(long, env = "MLXR_HOST", default_value = mlxr_server::server::DEFAULT_HOST)]
    pub host: String,
    /// Also listen on this Unix domain socket.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Where the registry and model blobs live.
    #[arg(long, env = "MLXR_HOME")]
    pub home: Option<PathBuf>,
    /// A GGUF file to serve besides the registry's models (repeatable).
    #[arg(short = 'm', long = "model", value_name = "PATH")]
    pub models: Vec<PathBuf>,
    /// The name clients use for the -m model (one per -m, in order; default: the file name).
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Require "Authorization: Bearer KEY" on every API call.
    #[arg(long, env = "MLXR_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Browser origins allowed besides localhost (comma-separated; * for any).
    #[arg(long, env = "MLXR_ORIGINS", value_delimiter = ',')]
    pub origins: Vec<String>,
    /// How long a model stays loaded after its last request (5m, 1h, 0, -1 = forever).
    #[arg(long, env = "MLXR_KEEP_ALIVE", default_value = "5m")]
    pub keep_alive: String,
    /// Models loaded at once; the least recently used one is unloaded first.
    #[arg(long, default_value_t = 2)]
    pub max_loaded_models: usize,
    /// Requests decoded together per model.
    #[arg(long, default_value_t = 16)]
    pub max_num_seqs: usize,
    /// Tokens per forward pass (decode tokens plus prompt chunks).
    #[arg(long, default_value_t = 512)]
    pub max_batched_tokens: usize,
    /// CPU threads (default: all cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Context size per sequence (default: the model's trained context).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// KV cache memory per model: bytes (2GiB, 512MiB) or a fraction of RAM (0.1).
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub kv_cache_mem: KvBudget,
    /// Element type of the KV cache: f16, bf16 or f32.
    #[arg(long, default_value = "f16", value_name = "TYPE")]
    pub kv_dtype: KvDtype,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 32 << 20)]
    pub body_limit: usize,
}

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Path to a GGUF model file.
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: PathBuf,
    /// CPU threads (default: all cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Context size in tokens (default: the model's trained context).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// KV cache memory: bytes (2GiB, 512MiB) or a fraction of RAM (0.1).
    /// Default: enough for one full context.
    #[arg(long, value_name = "SIZE")]
    pub kv_cache_mem: Option<KvBudget>,
    /// Element type of the KV cache: f16, bf16 or f32.
    #[arg(long, default_value = "f16", value_name = "TYPE")]
    pub kv_dtype: KvDtype,
}

#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 picks the most likely token (greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0: off).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability adds up to P (1: off).
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0: off).
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalise tokens repeated in the last --repeat-last-n tokens (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Window of the repetition penalties, in tokens.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// OpenAI-style presence penalty.
    #[arg(long, default_value_t = 0.0)]
    pub presence_penalty: f32,
    /// OpenAI-style frequency penalty.
    #[arg(long, default_value_t = 0.0)]
    pub frequency_penalty: f32,
    /// Random seed: the same seed and settings give the same output.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop when this text appears (not printed). Repeatable.
    #[arg(long = "stop", value_name = "TEXT")]
    pub stop: Vec<String>,
    /// Maximum tokens to generate (default: until the model stops or the context is full).
    #[arg(short = 'n', long = "max-tokens", visible_alias = "n-predict")]
    pub max_tokens: Option<usize>,
    /// Keep generating past end-of-generation tokens.
    #[arg(long)]
    pub ignore_eos: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// A system prompt for the chat.
    #[arg(long)]
    pub system: Option<String>,
    /// Print prompt-eval and eval speed after each reply.
    #[arg(long)]
    pub verbose: bool,
    /// One message to answer; without it, an interactive chat starts.
    pub prompt: Option<String>,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Use PROMPT as is, without the chat template.
    #[arg(long)]
    pub raw: bool,
    /// Report the K most likely alternatives and the log-probability of each token.
    #[arg(long, value_name = "K")]
    pub logprobs: Option<usize>,
    /// Print one JSON object instead of streaming text.
    #[arg(long)]
    pub json: bool,
    pub prompt: String,
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// Path to a GGUF model file.
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: PathBuf,
    /// Print each token's text next to its id.
    #[arg(long)]
    pub pieces: bool,
    pub text: String,
}
