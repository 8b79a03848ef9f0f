//! The vocabulary description a tokenizer is built from, and how llama.cpp
//! derives flags, special ids and token attributes from it.

use crate::pretokenize::{GPT2, ISOLATE_NUMBERS, LLAMA3, NEWLINE_RUNS, QWEN2, QWEN35};

/// llama.cpp's token attribute bits (`llama_token_attr`).
pub(crate) mod attr {
    pub const UNDEFINED: u16 = 0;
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;
}

/// GGUF `tokenizer.ggml.token_type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenType {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

impl TokenType {
    /// The type for a GGUF type number (anything unknown is `Undefined`).
    pub fn from_gguf(v: i32) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }

    pub(crate) fn attr(self) -> u16 {
        match self {
            TokenType::Undefined => attr::UNDEFINED,
            TokenType::Normal => attr::NORMAL,
            TokenType::Unknown => attr::UNKNOWN,
            TokenType::Control => attr::CONTROL,
            TokenType::UserDefined => attr::USER_DEFINED,
            TokenType::Unused => attr::UNUSED,
            TokenType::Byte => attr::BYTE,
        }
    }
}

/// A token's attributes as llama.cpp tracks them: the GGUF type plus what
/// the loader infers (e.g. end-of-turn markers promoted to control, control
/// tokens named `unused`, lstrip/rstrip for some models).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TokenAttrs(pub(crate) u16);

impl TokenAttrs {
    pub fn is_normal(self) -> bool {
        self.0 & attr::NORMAL != 0
    }
    pub fn is_control(self) -> bool {
        self.0 & attr::CONTROL != 0
    }
    pub fn is_user_defined(self) -> bool {
        self.0 & attr::USER_DEFINED != 0
    }
    pub fn is_byte(self) -> bool {
        self.0 & attr::BYTE != 0
    }
    pub fn is_unknown(self) -> bool {
        self.0 & attr::UNKNOWN != 0
    }
    pub fn is_unused(self) -> bool {
        self.0 & attr::UNUSED != 0
    }
    pub fn lstrip(self) -> bool {
        self.0 & attr::LSTRIP != 0
    }
    pub fn rstrip(self) -> bool {
        self.0 & attr::RSTRIP != 0
    }
    /// The raw llama.cpp `llama_token_attr` bits.
    pub fn bits(self) -> u16 {
        self.0
    }
}

/// Special token ids as given by `tokenizer.ggml.*_token_id` keys (raw: not
/// yet checked against the vocabulary size).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokenIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// Everything a tokenizer is built from: the `tokenizer.ggml.*` metadata of a
/// GGUF file (see [`crate::Tokenizer::from_gguf`]) or an in-memory vocabulary
/// (tests, other formats). Options left `None` mean "key absent".
#[derive(Clone, Debug, Default)]
pub struct TokenizerConfig {
    /// `tokenizer.ggml.model`: `"gpt2"` (byte-level BPE), `"llama"` (SPM) or `"gemma4"`.
    pub model: String,
    /// `tokenizer.ggml.pre`: the BPE pre-tokenizer type.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores` (SPM merge priorities).
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type` (GGUF numbering, see [`TokenType`]).
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges` (`"left right"`, BPE only).
    pub merges: Option<Vec<String>>,
    pub special: SpecialTokenIds,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_sep_token`.
    pub add_sep: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.ggml.remove_extra_whitespaces`.
    pub remove_extra_whitespaces: Option<bool>,
    /// `general.name` (llama.cpp sets per-token attributes for some models by name).
    pub model_name: Option<String>,
    /// `general.architecture`.
    pub architecture: Option<String>,
}

/// What a BPE pre-tokenizer type implies (llama.cpp's `pre_type` switch).
#[derive(Clone, Debug)]
pub(crate) struct PreConfig {
    pub regexes: &'static [&'static str],
    pub clean_spaces: bool,
    pub ignore_merges: bool,
    /// The type turns `add_bos` on (before the GGUF key may override it).
    pub add_bos: bool,
    pub add_sep: bool,
    /// Spaces become `▁` before BPE (SentencePiece-style BPE).
    pub escape_whitespaces: bool,
    /// GPT-2 byte-level encoding of words before merging.
    pub byte_encode: bool,
    /// The type has no BOS token (ChatGLM).
    pub no_bos: bool,
    /// Gemma 4's whole-newline-run rule.
    pub gemma4: bool,
}

const R_DEFAULT: &[&str] = &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"];
const R_GPT2: &[&str] = &[GPT2];
const R_LLAMA3: &[&str] = &[LLAMA3];
const R_SMOLLM: &[&str] = &[ISOLATE_NUMBERS, GPT2];
const R_FALCON: &[&str] = &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"];
const R_QWEN2: &[&str] = &[QWEN2];
const R_QWEN35: &[&str] = &[QWEN35];
const R_DEEPSEEK_CODER: &[&str] = &[
    "[\r\n]",
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    r"\p{N}",
];
const R_DEEPSEEK3: &[&str] = &[
    r"\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];
const R_BLOOM: &[&str] = &[" ?[^(\\s|.,!?…。，、।۔،)]+"];
const R_VIKING: &[&str] = &[" ?[^(\\s|.,!?…。，、।۔،)]+", r"\p{N}"];
const R_TEKKEN: &[&str] = &[
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];
const R_GPT4O: &[&str] = &[
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];
const R_BAILINGMOE: &[&str] = &[
    r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
];
const R_SEED_CODER: &[&str] = &[
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
];
const R_UFAKZEKA: &[&str] =
    &[r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"];
const R_MINICPM5: &[&str] = &[
    r"\p{N}{1,3}",
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
];
const R_CHAMELEON: &[&str] = &[
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    r"\p{N}",
    r"[\p{P}!-/:-@\[-`{-~]",
    GPT2,
];
const R_NEWLINES: &[&str] = &[NEWLINE_RUNS];

/// The BPE pre-tokenizer configuration for a `tokenizer.ggml.pre` value, as
/// llama.cpp maps it; `None` for a type MLXR does not know.
pub(crate) fn bpe_pre_config(pre: &str) -> Option<PreConfig> {
    let base = PreConfig {
        regexes: R_DEFAULT,
        clean_spaces: true,
        ignore_merges: false,
        add_bos: false,
        add_sep: false,
        escape_whitespaces: false,
        byte_encode: true,
        no_bos: false,
        gemma4: false,
    };
    let with = |regexes: &'static [&'static str]| PreConfig {
        regexes,
        ..base.clone()
    };
    let unclean = |regexes: &'static [&'static str]| PreConfig {
        regexes,
        clean_spaces: false,
        ..base.clone()
    };
    Some(match pre {
        "default" => base.clone(),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => PreConfig {
            ignore_merges: true,
            add_bos: true,
            ..with(R_LLAMA3)
        },
        "deepseek-coder" => unclean(R_DEEPSEEK_CODER),
        "deepseek-v3" | "hunyuan-dense" | "joyai-llm" | "hy_v4" => unclean(R_DEEPSEEK3),
        "falcon" => with(R_FALCON),
        "mpt" | "olmo" | "jais" | "exaone4" => with(R_GPT2),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" => with(R_GPT2),
        "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => PreConfig {
            add_sep: true,
            ..with(R_GPT2)
        },
        "trillion" | "granite-docling" => unclean(R_GPT2),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            with(R_SMOLLM)
        }
        "smollm" | "command-r" => unclean(R_SMOLLM),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "grok-2"
        | "solar-open" => unclean(R_QWEN2),
        "megrez" | "stablelm2" => with(R_QWEN2),
        "qwen35" => unclean(R_QWEN35),
        "dbrx" | "smaug-bpe" => with(R_LLAMA3),
        "poro-chat" => unclean(R_BLOOM),
        "bloom" | "gpt3-finnish" => with(R_BLOOM),
        "viking" => unclean(R_VIKING),
        "chatglm-bpe" => PreConfig {
            no_bos: true,
            ..with(R_LLAMA3)
        },
        "glm4" | "glm5" => PreConfig {
            no_bos: true,
            ignore_merges: true,
            ..with(R_LLAMA3)
        },
        "tekken" => PreConfig {
            ignore_merges: true,
            add_bos: true,
            ..unclean(R_TEKKEN)
        },
        "chameleon" => PreConfig {
            add_bos: true,
            ..unclean(R_CHAMELEON)
        },
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => unclean(R_GPT4O),
        "bailingmoe" | "bailingmoe2" | "llada-moe" => unclean(R_BAILINGMOE),
        "seed-coder" => unclean(R_SEED_CODER),
        "ufakzeka" => unclean(R_UFAKZEKA),
        "minicpm5" => PreConfig {
            ignore_merges: true,
            ..with(R_MINICPM5)
        },
        "gemma4" | "granite-embed-multi-311m" => PreConfig {
            escape_whitespaces: true,
            byte_encode: false,
            gemma4: true,
            ..with(R_NEWLINES)
        },
        "sarvam-moe" => PreConfig {
            escape_whitespaces: true,
            byte_encode: false,
            ..unclean(R_NEWLINES)
        },
        _ => return None,
    })
}

/// Token texts llama.cpp treats as end of generation.
pub(crate) const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Texts that identify the end-of-turn token when no id is given.
pub(crate) const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
pub(crate) const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
pub(crate) const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
pub(crate) const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
pub(crate) const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
pub(crate) const FIM_PAD_TEXTS: &[&str] =
    &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
pub(crate) const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
pub(crate) const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
