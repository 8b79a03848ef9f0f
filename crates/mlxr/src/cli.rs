//! Command-line syntax. Kept apart from what the commands do.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand};
use mlxr_engine::{DeviceChoice, DraftLength, GrammarMasks, KvBudget, KvDtype, SpecType};

#[derive(Parser, Debug)]
#[command(
    name = "mlxr",
    version,
    about = "Run large language models locally: in a terminal, or as an OpenAI- and Ollama-compatible server.",
    after_help = "Examples:
  mlxr run -m ~/.cache/mlxr/models/SmolLM2-135M-Instruct.Q4_1.gguf     chat with a model file, no server
  mlxr generate -m model.gguf --raw -n 32 --temperature 0 \"The capital of France is\"
  mlxr tokenize -m model.gguf --pieces \"Hello, world!\"
  mlxr bench -m model.gguf -p 512 -n 128 -t 2    prompt and generation tokens/s, like llama-bench
  mlxr quantize model-f16.gguf model-Q4_K_M.gguf --type Q4_K_M   as llama-quantize, bit for bit
  mlxr convert ./Qwen3-0.6B qwen3-0.6b-f16.gguf     a Hugging Face folder to GGUF, as convert_hf_to_gguf.py
  mlxr serve                                     start the daemon (http://127.0.0.1:11435, web UI there too)
  mlxr pull smollm2:135m && mlxr run smollm2:135m \"Why is the sky blue?\"   through the daemon"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Chat with a model: one reply to PROMPT, or an interactive chat without it.
    #[command(after_help = "Examples:
  mlxr run smollm2                                          chat through `mlxr serve` (pulled if missing)
  mlxr run smollm2 \"Why is the sky blue?\" --verbose      one reply, with Ollama-style timings
  mlxr run -m SmolLM2-135M-Instruct.Q4_1.gguf               in-process, no daemon (/bye or Ctrl-D to leave)
  mlxr run -m SmolLM2-135M-Instruct.Q4_1.gguf \"Hi there\"    one reply, then exit
  mlxr run -m model.gguf --verbose --temperature 0 \"2+2=\"   with timings
  mlxr run qwen-coder --tools tools.json \"Weather in Paris?\" the model's tool calls shown

In a chat, Ctrl-C stops the current reply; /bye or Ctrl-D leaves.")]
    Run(RunArgs),
    /// Complete a prompt (chat-templated unless --raw) and print the result.
    #[command(after_help = "Examples:
  mlxr generate -m model.gguf \"Write a haiku about rust\"
  mlxr generate -m model.gguf --raw -n 32 --temperature 0 \"def fib(n):\"
  mlxr generate -m model.gguf --raw --json --logprobs 3 -n 8 \"Once upon a time\"
  mlxr generate -m model.gguf --json-schema person.json \"Describe a programmer\"
  mlxr generate -m model.gguf --regex '(yes|no)' \"Is the sky blue?\"

--json prints one object: {\"text\", \"tokens\", \"prompt_tokens\", \"finish_reason\",
\"logprobs\" (with --logprobs), \"timings\": {\"prompt_n\", \"prompt_ms\", \"predicted_n\", \"predicted_ms\"}}.")]
    Generate(GenerateArgs),
    /// Print the token ids a model sees for TEXT (as a raw prompt) as a JSON array.
    #[command(after_help = "Examples:
  mlxr tokenize -m model.gguf \"Hello, world!\"            [1, 19556, 28, 905, 17]
  mlxr tokenize -m model.gguf --pieces \"Hello\"           [{\"id\": 19556, \"piece\": \"Hello\"}]")]
    Tokenize(TokenizeArgs),
    /// Measure prompt-processing (ppN) and generation (tgN) speed, like llama-bench.
    #[command(after_help = "Examples:
  mlxr bench -m SmolLM2-135M-Instruct.Q4_1.gguf                   pp512 and tg128, physical cores, 5 runs each
  mlxr bench -m model.gguf -p 512 -n 128 -t 2 -r 5                 llama-bench's defaults on 2 threads
  mlxr bench -m model.gguf --device cpu                            on the CPU even where a GPU build finds a GPU
  mlxr bench -m model.gguf -p 128,512 -n 0 -t 1,2                  prompts only, two thread counts
  mlxr bench -m model.gguf -p 512 -n 128 -d 0,512 -t 2             also after 512 tokens of context (llama-bench -d)
  mlxr bench -m model.gguf -p 16 -n 4 -r 1 -o json                 one JSON array, llama-bench's keys
  mlxr bench -m model.gguf -p 128 -n 128 --parallel 1,8,64         8 and 64 sequences at once, like llama-batched-bench
  mlxr bench -m qwen-1.5b.gguf -p 0 -n 128 --model-draft qwen-0.5b.gguf   tg128 drafted by a smaller model

Everything runs through the engine `mlxr generate` and `mlxr serve` use (EngineHandle:
scheduler, paged KV cache, greedy sampling), with the prefix cache off and random token ids.
ppN: one request with an N-token prompt and max_tokens 1, timed by the engine from the step that
schedules it to its first token (the prompt's forward passes and one sampling step; a prompt
longer than --batch-size is read in chunks, like llama-bench's ubatch). tgN: a one-token prompt,
then N single-token decode steps, timed from the first generated token to the last. At depth D
(-d D): ppN first reads D random tokens untimed, then times N more after them (the D from the
prefix cache, which is on only then); tgN's prompt is D tokens. Each test runs once as a warm-up, then -r times; t/s is the mean ± sample standard deviation over runs.
Model loading is not timed. -o json prints llama-bench's keys (avg_ts, stddev_ts, samples_ts, ...).")]
    Bench(BenchArgs),
    /// Serve models over OpenAI- and Ollama-compatible HTTP APIs.
    #[command(after_help = "Examples:
  mlxr serve                                        models from the registry (MLXR_HOME, default ~/.mlxr)
  mlxr serve -m SmolLM2-135M-Instruct.Q4_1.gguf     also serve this file (as \"smollm2-135m-instruct.q4_1\")
  mlxr serve -m model.gguf --name smollm2 --host 0.0.0.0:8080 --api-key secret
  mlxr serve --socket /run/mlxr/mlxr.sock                  also a Unix socket, mode 0600 (MLXR_HOST=unix:/run/mlxr/mlxr.sock mlxr list)
  mlxr serve --socket /run/mlxr/mlxr.sock --socket-group mlxr   mode 0660, group mlxr
  mlxr serve --socket /run/mlxr/mlxr.sock --no-tcp         the socket only, no TCP port (as the desktop app runs it)
  mlxr serve --origins https://app.example.com             let that web page call the API from a browser
  mlxr serve --allowed-hosts mybox.lan                     answer http://mybox.lan:11435 on the loopback listener
  curl http://127.0.0.1:11435/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{\"model\":\"smollm2\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'

Browsers: a request with an Origin header must come from a loopback origin (any port), the server's
own origin, or --origins; otherwise 403. JSON bodies must be sent as Content-Type: application/json
(else 415). While --host is a loopback address, the Host header must be a loopback address,
localhost, *.localhost, the --host name, this machine's hostname or one of --allowed-hosts (DNS
rebinding protection; the Unix socket is exempt); otherwise 403.

Environment: MLXR_HOST, MLXR_HOME, MLXR_API_KEY, MLXR_KEEP_ALIVE, MLXR_ORIGINS, MLXR_ALLOWED_HOSTS (comma-separated).")]
    Serve(ServeArgs),
    /// Download a model into the daemon's registry.
    #[command(after_help = "Examples:
  mlxr pull smollm2                                         a default model
  mlxr pull hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M
  mlxr pull ./SmolLM2-135M-Instruct.Q4_1.gguf               a file or model folder here (uploaded to the daemon)

Ctrl-C stops the download; pulling again resumes it.")]
    Pull(PullArgs),
    /// List the daemon's models.
    #[command(
        visible_alias = "ls",
        after_help = "Examples:
  mlxr list
  MLXR_HOST=10.0.0.5:11435 mlxr ls
  MLXR_HOST=grpc://127.0.0.1:11435 mlxr ls           over the gRPC API (the same port serves both)"
    )]
    List(HostArg),
    /// List the models loaded in memory now.
    #[command(after_help = "Examples:
  mlxr ps
  mlxr ps --host http://127.0.0.1:8080")]
    Ps(HostArg),
    /// Show a model's details, or one piece of it.
    #[command(after_help = "Examples:
  mlxr show smollm2                     architecture, parameters, context length, quantization
  mlxr show smollm2 --modelfile         the Modelfile that would recreate it
  mlxr show smollm2 --parameters")]
    Show(ShowArgs),
    /// Create a model from a Modelfile.
    #[command(after_help = "Examples:
  mlxr create terse -f Modelfile

A Modelfile:
  FROM ./SmolLM2-135M-Instruct.Q4_1.gguf     (or a model name: FROM smollm2)
  PARAMETER temperature 0
  PARAMETER stop \"<|im_end|>\"
  SYSTEM \"\"\"You answer in one sentence.\"\"\"
  MESSAGE user Hi
  MESSAGE assistant Hello.")]
    Create(CreateArgs),
    /// Copy a model under a new name.
    #[command(after_help = "Examples:
  mlxr cp smollm2 my-smollm2")]
    Cp(CopyArgs),
    /// Remove models.
    #[command(after_help = "Examples:
  mlxr rm my-smollm2
  mlxr rm a b c")]
    Rm(RemoveArgs),
    /// Unload a model from memory now.
    #[command(after_help = "Examples:
  mlxr stop smollm2")]
    Stop(StopArgs),
    /// Quantize a GGUF model to another type, like llama.cpp's llama-quantize, or a
    /// Hugging Face folder to an MLX affine-quantized folder, like mlx_lm.convert -q.
    #[command(after_help = "Examples:
  mlxr quantize model-f16.gguf model-Q4_K_M.gguf --type Q4_K_M
  mlxr quantize model-f16.gguf model-Q8_0.gguf --type q8_0 --threads 4
  mlxr quantize SmolLM2-135M-Instruct.Q4_1.gguf smollm2-q4_0.gguf --type Q4_0 --allow-requantize
  mlxr quantize ./Qwen3-0.6B qwen3-0.6b-Q4_K_M.gguf --type Q4_K_M     a Hugging Face folder
  mlxr quantize ./Qwen3-0.6B ./Qwen3-0.6B-4bit --type q4 --group-size 64   an MLX folder

IN may be a Hugging Face safetensors folder (what `mlxr convert` reads): it is converted
first (--outtype lossless: to the weights' own F16/BF16 type, else F32) into a hidden file
beside OUT that is removed at the end; the result is what convert_hf_to_gguf.py followed by
llama-quantize writes.

Types: Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q6_K, Q8_0, Q3_K_L, Q3_K_M, Q3_K_S, Q2_K,
Q4_0, Q4_1, Q5_0, Q5_1, F16, BF16, F32 (any case; Q4_K, Q5_K, Q3_K mean their _M mix).
Each tensor gets the type llama.cpp's rules give it in the mix (output.weight Q6_K,
some attn_v/ffn_down layers higher, norms F32, rows that are not whole 256-blocks a
32-block type); without an importance matrix the output is bit-identical to
llama-quantize's. The file is written under a hidden name beside OUT and renamed at the
end: Ctrl-C or an error leaves nothing.

MLX output: --type q2, q3, q4, q5, q6 or q8 (bits) with --group-size 32, 64 or 128
(default 64) writes the folder OUT as `mlx_lm.convert --hf-path IN --mlx-path OUT -q
--q-bits B --q-group-size G` does, tensor for tensor: every Linear/Embedding weight
whose width G divides as packed U32 words with scales and biases (in config.json's
torch_dtype, else the weights' own type), the rest as they are, config.json with
`quantization` and `quantization_config`, tokenizer and template files copied. IN must
be an unquantized Hugging Face folder.")]
    Quantize(QuantizeArgs),
    /// Convert a Hugging Face safetensors folder to GGUF (like llama.cpp's convert_hf_to_gguf.py), or a GGUF to a folder.
    #[command(after_help = "Examples:
  mlxr convert ./SmolLM2-135M-Instruct smollm2-135m-f16.gguf
  mlxr convert ./Qwen3-0.6B qwen3-0.6b-bf16.gguf --outtype bf16
  mlxr convert ./Llama-3.2-1B-Instruct llama-3.2-1b-q8_0.gguf --outtype q8_0
  mlxr convert ./my-finetune out.gguf --tokenizer-pre llama-bpe    a tokenizer the converter does not recognise
  mlxr convert ./Qwen3-0.6B-4bit qwen3-0.6b-q8_0.gguf --outtype q8_0   an MLX (mlx-lm) folder
  mlxr convert SmolLM2-135M-Instruct.Q4_1.gguf ./smollm2-hf --outtype bf16   GGUF to a folder
  mlxr convert ./Llama-3.1-8B-FP8 ./llama-3.1-8b-bf16 --outtype bf16   an FP8 folder dequantized

IN is a folder with config.json, *.safetensors (one file, or shards with
model.safetensors.index.json), tokenizer.json and tokenizer_config.json (chat template
inline, or chat_template.jinja). Architectures: LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM,
Gemma3ForCausalLM; F32, F16 or BF16
weights, or FP8, bitsandbytes NF4/FP4 and MLX affine-quantized ones (decoded as mlxr runs
them, then written as --outtype says); byte-level BPE tokenizer.json or SentencePiece
tokenizer.model vocabularies. The GGUF holds what convert_hf_to_gguf.py writes
(hyperparameters, tokenizer, chat template, llama's Q/K rows permuted for llama.cpp's
RoPE, Gemma norms as 1+w); for the tiny test folders the files are byte-identical.
1-D tensors, norms and biases stay F32 whatever --outtype says.

IN a GGUF file (same architectures, byte-level BPE vocabulary, any type candle
dequantizes) and OUT not ending in .gguf: a folder with config.json, model.safetensors
(dequantized; --outtype f32 (auto), f16 or bf16), tokenizer.json, tokenizer_config.json,
chat_template.jinja and generation_config.json, which converts back to the same tensors.
IN an FP8, bitsandbytes 4-bit or MLX folder and OUT a folder: the same folder dequantized
(same tensor names, config.json without its quantization, other files copied).
Either output is written under a hidden name beside OUT and renamed at the end: Ctrl-C or
an error leaves nothing.")]
    Convert(ConvertArgs),
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// A Hugging Face model folder (config.json, *.safetensors, tokenizer.json), or a GGUF file.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The GGUF file to write (ends in .gguf), or the folder to write.
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Type of the 2-D weights: f32, f16, bf16, q8_0, or auto (to GGUF: the stored F16/BF16
    /// type, else f16; to a folder: f32).
    #[arg(long, value_name = "TYPE", default_value = "auto")]
    pub outtype: String,
    /// llama.cpp's pre-tokenizer name (tokenizer.ggml.pre) for a tokenizer the converter
    /// does not recognise, e.g. llama-bpe, qwen2, gpt-2, smollm.
    #[arg(long, value_name = "NAME")]
    pub tokenizer_pre: Option<String>,
    /// Overwrite OUT if it exists (a folder only if it holds a config.json).
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// A GGUF model of F32, F16 or BF16 tensors (or a quantized one, with
    /// --allow-requantize), or a Hugging Face safetensors folder.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The GGUF file to write (the folder, for MLX output).
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// The quantization type or mix, e.g. Q4_K_M, or q2..q8 for MLX output (see below).
    #[arg(long = "type", value_name = "T")]
    pub file_type: String,
    /// MLX output: values per scale and bias, 32, 64 or 128 (default 64).
    #[arg(long, value_name = "G")]
    pub group_size: Option<usize>,
    /// Threads quantizing rows (default: physical cores).
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,
    /// Overwrite OUT if it exists.
    #[arg(long)]
    pub force: bool,
    /// Dequantize and requantize tensors that are already quantized (loses quality).
    #[arg(long)]
    pub allow_requantize: bool,
    /// For a folder IN: the type it is converted to before quantizing (lossless: the
    /// weights' own F16/BF16 type when they share one, else f32, so nothing is rounded
    /// twice; f16 gives what convert_hf_to_gguf.py --outtype f16 then llama-quantize gives).
    #[arg(long, value_name = "TYPE", default_value = "lossless")]
    pub outtype: String,
    /// For a folder IN: llama.cpp's pre-tokenizer name, as for `mlxr convert`.
    #[arg(long, value_name = "NAME")]
    pub tokenizer_pre: Option<String>,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// A TOML config file (keys as the long flags, e.g. `max_num_seqs = 8`;
    /// see configs/server.toml). Flags and environment variables win over it.
    #[arg(long, env = "MLXR_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, host:port.
    #[arg(long, env = "MLXR_HOST", default_value = mlxr_server::server::DEFAULT_HOST)]
    pub host: String,
    /// Also listen on this Unix domain socket, mode 0600 (a stale socket
    /// is replaced; a live one is an error).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Give the socket to this group (name or id), mode 0660.
    #[arg(long, value_name = "GROUP", requires = "socket")]
    pub socket_group: Option<String>,
    /// Listen on the Unix socket only: no TCP port (--host and --grpc-port
    /// are not used). The desktop app runs its daemon this way.
    #[arg(long, requires = "socket", conflicts_with = "grpc_port")]
    pub no_tcp: bool,
    /// Also listen on this port of --host's address, for gRPC clients that
    /// want a port of their own (gRPC answers on --host and the socket in
    /// any case; this listener answers REST too).
    #[arg(long, value_name = "PORT")]
    pub grpc_port: Option<u16>,
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
    /// Browser origins allowed besides loopback ones, e.g.
    /// https://app.example.com (comma-separated; * for any).
    #[arg(long, env = "MLXR_ORIGINS", value_delimiter = ',')]
    pub origins: Vec<String>,
    /// Host names the loopback listener answers besides localhost, loopback
    /// addresses and this machine's hostname (comma-separated; * turns the
    /// Host check off).
    #[arg(
        long,
        env = "MLXR_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "HOSTS"
    )]
    pub allowed_hosts: Vec<String>,
    /// How long a model stays loaded after its last request (5m, 1h, 0, -1 = forever).
    #[arg(long, env = "MLXR_KEEP_ALIVE", default_value = "5m")]
    pub keep_alive: String,
    /// How long a request waits while another request loads a model before
    /// it gets 503 (the load goes on): 5m, 30s, 500ms.
    #[arg(long, env = "MLXR_LOAD_TIMEOUT", default_value = "5m")]
    pub load_timeout: String,
    /// Models loaded at once; the least recently used one is unloaded first.
    #[arg(long, default_value_t = 2)]
    pub max_loaded_models: usize,
    /// Memory all loaded models may take, weights plus KV cache (e.g. 8GiB,
    /// or 0.5 of RAM); least recently used models unload to make room.
    #[arg(long, value_name = "SIZE")]
    pub max_loaded_memory: Option<KvBudget>,
    /// Requests decoded together per model.
    #[arg(long, default_value_t = 16)]
    pub max_num_seqs: usize,
    /// Tokens per forward pass (decode tokens plus prompt chunks).
    #[arg(long, default_value_t = 512)]
    pub max_batched_tokens: usize,
    /// CPU threads (default: the physical cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Context size per sequence (default: the model's trained context).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// KV cache memory per model: bytes (2GiB, 512MiB) or a fraction (0.1) of
    /// RAM, or of free GPU memory for a model on a GPU.
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    pub kv_cache_mem: KvBudget,
    /// Element type of the KV cache: f16, bf16 or f32.
    #[arg(long, default_value = "f16", value_name = "TYPE")]
    pub kv_dtype: KvDtype,
    /// Where the model runs: auto (the best device this build supports and
    /// the machine has), cpu, cuda, cuda:N or metal.
    #[arg(
        long,
        env = "MLXR_DEVICE",
        default_value = "auto",
        value_name = "DEVICE"
    )]
    pub device: DeviceChoice,
    /// When constrained requests' grammar masks are computed: ahead (on
    /// other threads while the forward pass runs), lazy (only when the
    /// grammar refuses the token drawn) or auto (ahead on a GPU, lazy on
    /// the CPU, whose cores the forward pass uses). Outputs are the same.
    #[arg(long, default_value = "auto", value_name = "WHEN")]
    pub grammar_masks: GrammarMasks,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 32 << 20)]
    pub body_limit: usize,
    /// Largest blob upload, e.g. 64GiB (default: the larger of 64 GiB and 4 × RAM).
    #[arg(long, env = "MLXR_MAX_BLOB_SIZE", value_name = "SIZE")]
    pub max_blob_size: Option<mlxr_server::ByteSize>,
    /// Let /api/pull read files and folders on this machine (`mlxr pull PATH`
    /// needs no flag: it uploads the files).
    #[arg(long, env = "MLXR_ALLOW_LOCAL_PULLS", value_parser = BoolishValueParser::new())]
    pub allow_local_pulls: bool,
    /// Let pulls use plain http:// URLs (and follow redirects to them).
    #[arg(long, env = "MLXR_ALLOW_INSECURE_PULLS", value_parser = BoolishValueParser::new())]
    pub allow_insecure_pulls: bool,
    #[command(flatten)]
    pub spec: SpecArgs,
}

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// A GGUF file, or a Hugging Face / MLX model folder (config.json, safetensors, tokenizer.json).
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: PathBuf,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// How the in-process engine runs a model file.
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// CPU threads (default: the physical cores).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Context size in tokens (default: the model's trained context).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// KV cache memory: bytes (2GiB, 512MiB) or a fraction (0.1) of RAM, or
    /// of free GPU memory for a model on a GPU.
    /// Default: enough for one full context.
    #[arg(long, value_name = "SIZE")]
    pub kv_cache_mem: Option<KvBudget>,
    /// Element type of the KV cache: f16, bf16 or f32.
    #[arg(long, default_value = "f16", value_name = "TYPE")]
    pub kv_dtype: KvDtype,
    /// Where the model runs: auto (the best device this build supports and
    /// the machine has), cpu, cuda, cuda:N or metal.
    #[arg(
        long,
        env = "MLXR_DEVICE",
        default_value = "auto",
        value_name = "DEVICE"
    )]
    pub device: DeviceChoice,
    #[command(flatten)]
    pub spec: SpecArgs,
}

/// Speculative decoding, with llama-server's flags: the default for every
/// request (requests may set `speculative.type`, `speculative.n_max`,
/// `speculative.n_min` and `speculative.p_min` themselves).
#[derive(Args, Debug, Clone, Default)]
pub struct SpecArgs {
    /// none; ngram: prompt lookup, draft tokens copied from where the last
    /// few tokens occurred earlier in the prompt or output; draft: tokens
    /// from --model-draft. Drafts are verified in one step: the output is
    /// the same as without. [default: none, draft with --model-draft]
    #[arg(long, value_name = "TYPE")]
    pub spec_type: Option<SpecType>,
    /// Most draft tokens verified per step (up to 32). [default: 8]
    #[arg(long, visible_alias = "draft", value_name = "N")]
    pub draft_max: Option<usize>,
    /// Shorter drafts are not verified. [default: 0]
    #[arg(long, value_name = "N")]
    pub draft_min: Option<usize>,
    /// A draft model keeps drafting while its token is at least this likely. [default: 0.75]
    #[arg(long, value_name = "P")]
    pub draft_p_min: Option<f32>,
    /// goodput: each step drafts the length that gives the most tokens per
    /// second at the measured step costs and acceptance (none when drafting
    /// does not pay); max: always --draft-max, as llama-server and vLLM. [default: goodput]
    #[arg(long, value_name = "HOW")]
    pub draft_length: Option<DraftLength>,
    /// A smaller model with the same vocabulary that drafts (e.g. Qwen2.5-0.5B
    /// for Qwen2.5-1.5B): a file, or for `serve` also the name of a model it
    /// serves; its KV cache shares --kv-cache-mem.
    #[arg(long, value_name = "MODEL")]
    pub model_draft: Option<PathBuf>,
    /// The draft model scores only its vocabulary's N most frequent tokens
    /// (FR-Spec; rankings ship for Qwen2's vocabulary), a cheaper pass for
    /// a draft whose LM head is a large part of it; 0: every token. The
    /// output is the same either way. [default: 32768]
    #[arg(long, value_name = "N")]
    pub draft_vocab: Option<usize>,
}

impl SpecArgs {
    /// These flags as a command line gives them.
    pub fn to_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let mut push = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                flags.extend([format!("--{name}"), v]);
            }
        };
        push("spec-type", self.spec_type.map(|t| t.to_string()));
        push("draft-max", self.draft_max.map(|n| n.to_string()));
        push("draft-min", self.draft_min.map(|n| n.to_string()));
        push("draft-p-min", self.draft_p_min.map(|p| p.to_string()));
        push("draft-length", self.draft_length.map(|l| l.to_string()));
        push("draft-vocab", self.draft_vocab.map(|n| n.to_string()));
        push(
            "model-draft",
            self.model_draft.as_ref().map(|p| p.display().to_string()),
        );
        flags
    }
}

/// Where the daemon listens, for the commands that talk to it.
#[derive(Args, Debug)]
pub struct HostArg {
    /// The `mlxr serve` address: host:port, a URL, unix:PATH, or grpc://HOST:PORT and
    /// grpc+unix:PATH for its gRPC API [env: MLXR_HOST; default: 127.0.0.1:11435]. The API
    /// key, if the daemon wants one, comes from MLXR_API_KEY.
    #[arg(long, value_name = "ADDR")]
    pub host: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 picks the most likely token (greedy). [default: 0.8]
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,
    /// Keep only the K most likely tokens (0: off). [default: 40]
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens whose probability adds up to P (1: off). [default: 0.95]
    #[arg(long, value_name = "P")]
    pub top_p: Option<f32>,
    /// Drop tokens less likely than P times the most likely one (0: off). [default: 0.05]
    #[arg(long, value_name = "P")]
    pub min_p: Option<f32>,
    /// Penalise tokens repeated in the last --repeat-last-n tokens (1: off). [default: 1]
    #[arg(long, value_name = "X")]
    pub repeat_penalty: Option<f32>,
    /// Window of the repetition penalties, in tokens. [default: 64]
    #[arg(long, value_name = "N")]
    pub repeat_last_n: Option<usize>,
    /// OpenAI-style presence penalty. [default: 0]
    #[arg(long, value_name = "X")]
    pub presence_penalty: Option<f32>,
    /// OpenAI-style frequency penalty. [default: 0]
    #[arg(long, value_name = "X")]
    pub frequency_penalty: Option<f32>,
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
    /// Run this GGUF file or HF/MLX model folder in-process, without the daemon.
    #[arg(short = 'm', long = "model", value_name = "PATH")]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// A system prompt for the chat.
    #[arg(long)]
    pub system: Option<String>,
    /// Print prompt-eval and eval speed after each reply.
    #[arg(long)]
    pub verbose: bool,
    /// How long the daemon keeps the model loaded afterwards (5m, 1h, 0, -1).
    #[arg(long, value_name = "DURATION")]
    pub keepalive: Option<String>,
    /// Tools the model may call: a JSON array of tool definitions
    /// (`{"type": "function", "function": {"name", "description",
    /// "parameters"}}`); its calls are printed. Models on the daemon only.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub host: HostArg,
    /// A model on the daemon (pulled if missing), a GGUF file or a model folder; with -m, the prompt.
    pub name: Option<String>,
    /// One message to answer; without it, an interactive chat starts.
    pub prompt: Option<String>,
}

#[derive(Args, Debug)]
pub struct PullArgs {
    /// A model name, hf.co/…, an https URL or a file path on the daemon's machine.
    pub name: String,
    #[command(flatten)]
    pub host: HostArg,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    pub name: String,
    /// Print the model's Modelfile.
    #[arg(long, group = "piece")]
    pub modelfile: bool,
    /// Print the model's parameters.
    #[arg(long, group = "piece")]
    pub parameters: bool,
    /// Print the model's chat template.
    #[arg(long, group = "piece")]
    pub template: bool,
    /// Print the model's system prompt.
    #[arg(long, group = "piece")]
    pub system: bool,
    /// Print the model's license.
    #[arg(long, group = "piece")]
    pub license: bool,
    #[command(flatten)]
    pub host: HostArg,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The new model's name.
    pub name: String,
    /// The Modelfile to build it from.
    #[arg(
        short = 'f',
        long = "file",
        value_name = "MODELFILE",
        default_value = "Modelfile"
    )]
    pub file: PathBuf,
    #[command(flatten)]
    pub host: HostArg,
}

#[derive(Args, Debug)]
pub struct CopyArgs {
    pub source: String,
    pub destination: String,
    #[command(flatten)]
    pub host: HostArg,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    #[arg(required = true, value_name = "NAME")]
    pub names: Vec<String>,
    #[command(flatten)]
    pub host: HostArg,
}

#[derive(Args, Debug)]
pub struct StopArgs {
    pub name: String,
    #[command(flatten)]
    pub host: HostArg,
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
    /// The reply is JSON valid under the JSON schema in FILE.
    #[arg(long, value_name = "FILE", group = "constraint")]
    pub json_schema: Option<PathBuf>,
    /// The reply follows the Lark grammar in FILE (llguidance's dialect:
    /// `start: ...`, `%json {...}` for an inline schema).
    #[arg(long, value_name = "FILE", group = "constraint")]
    pub grammar: Option<PathBuf>,
    /// The reply matches the regular expression RX in full.
    #[arg(long, value_name = "RX", group = "constraint")]
    pub regex: Option<String>,
    pub prompt: String,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A GGUF file, or a Hugging Face / MLX model folder (config.json, safetensors, tokenizer.json).
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: PathBuf,
    /// Prompt lengths to time (comma-separated; 0 skips).
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_value = "512",
        value_name = "N"
    )]
    pub n_prompt: Vec<usize>,
    /// Generation lengths to time (comma-separated; 0 skips).
    #[arg(
        short = 'n',
        long = "n-gen",
        value_delimiter = ',',
        default_value = "128",
        value_name = "N"
    )]
    pub n_gen: Vec<usize>,
    /// Tokens already in the context before each test (comma-separated, like
    /// llama-bench's -d): ppN reads N more tokens after a cached prefix of
    /// this many, tgN decodes from this position.
    #[arg(
        short = 'd',
        long = "n-depth",
        value_delimiter = ',',
        default_value = "0",
        value_name = "N"
    )]
    pub n_depth: Vec<usize>,
    /// CPU threads, comma-separated for several runs (default: the physical cores).
    #[arg(short = 't', long, value_delimiter = ',', value_name = "N")]
    pub threads: Vec<usize>,
    /// Timed runs of each test (after one warm-up run).
    #[arg(short = 'r', long, default_value_t = 5)]
    pub repetitions: usize,
    /// Output format: md (a table like llama-bench's) or json.
    #[arg(short = 'o', long, value_enum, default_value_t = BenchOutput::Md)]
    pub output: BenchOutput,
    /// Tokens per forward pass (the engine's max_num_batched_tokens; llama-bench's -ub).
    #[arg(short = 'b', long, default_value_t = 512, value_name = "N")]
    pub batch_size: usize,
    /// Context size (default: just enough for the longest test).
    #[arg(short = 'c', long = "ctx-size")]
    pub ctx_size: Option<usize>,
    /// Element type of the KV cache: f16, bf16 or f32.
    #[arg(long, default_value = "f16", value_name = "TYPE")]
    pub kv_dtype: KvDtype,
    /// Where the model runs: auto (the best device this build supports and
    /// the machine has), cpu, cuda, cuda:N or metal.
    #[arg(
        long,
        env = "MLXR_DEVICE",
        default_value = "auto",
        value_name = "DEVICE"
    )]
    pub device: DeviceChoice,
    /// Sequences served together (comma-separated): measures what
    /// llama-batched-bench does (-npl), B sequences of -p prompt and -n
    /// generated tokens at once, aggregate prompt and decode speed.
    #[arg(long, value_delimiter = ',', value_name = "B")]
    pub parallel: Vec<usize>,
    /// tgN with speculative decoding (each test also reports the draft
    /// tokens accepted).
    #[command(flatten)]
    pub spec: SpecArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchOutput {
    Md,
    Json,
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// A GGUF file, or a Hugging Face / MLX model folder (config.json, safetensors, tokenizer.json).
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: PathBuf,
    /// Print each token's text next to its id.
    #[arg(long)]
    pub pieces: bool,
    pub text: String,
}
