//! The JSON files of a sentence-transformers folder: the BERT `config.json`,
//! `modules.json`, `1_Pooling/config.json` and `sentence_bert_config.json`.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::EmbedError;
use crate::pooling::Pooling;

/// The fields of a Hugging Face `BertModel` config.json the encoder needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    #[serde(default = "default_position_embedding_type")]
    pub position_embedding_type: String,
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_type_vocab_size() -> usize {
    2
}
fn default_layer_norm_eps() -> f64 {
    1e-12
}
fn default_hidden_act() -> String {
    "gelu".to_string()
}
fn default_position_embedding_type() -> String {
    "absolute".to_string()
}

impl BertConfig {
    pub fn load(path: &Path) -> Result<Self, EmbedError> {
        let config: Self = read_json(path)?;
        config.validate().map_err(|message| EmbedError::BadConfig {
            path: path.to_path_buf(),
            message,
        })?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(model_type) = &self.model_type {
            if model_type != "bert" {
                return Err(format!("model_type {model_type:?} is not \"bert\""));
            }
        }
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported (only \"gelu\")",
                self.hidden_act
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?} is not supported (only \"absolute\")",
                self.position_embedding_type
            ));
        }
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{name} is 0"));
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps.is_finite()) {
            return Err(format!(
                "layer_norm_eps {} is not positive",
                self.layer_norm_eps
            ));
        }
        Ok(())
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// What the folder's sentence-transformers modules do after the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineConfig {
    pub pooling: Pooling,
    pub normalize: bool,
    /// Longest input in tokens, special tokens included.
    pub max_seq_length: usize,
}

#[derive(Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct PoolingFile {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

#[derive(Deserialize)]
struct SentenceBertFile {
    max_seq_length: Option<usize>,
}

impl PipelineConfig {
    /// Reads the sentence-transformers files of `dir`. Without modules.json the
    /// folder is a plain transformers model, which sentence-transformers embeds
    /// with mean pooling and no normalization; without sentence_bert_config.json
    /// the limit is the encoder's position table.
    pub fn load(dir: &Path, bert: &BertConfig) -> Result<Self, EmbedError> {
        let modules_path = dir.join("modules.json");
        let (pooling, normalize) = if modules_path.exists() {
            let modules: Vec<ModuleEntry> = read_json(&modules_path)?;
            let pooling_module = modules
                .iter()
                .find(|m| m.kind.ends_with("models.Pooling"))
                .ok_or_else(|| EmbedError::BadConfig {
                    path: modules_path.clone(),
                    message: "no sentence_transformers.models.Pooling module".to_string(),
                })?;
            let pooling_path = dir.join(&pooling_module.path).join("config.json");
            let pooling = parse_pooling(&pooling_path, &read_json(&pooling_path)?)?;
            let normalize = modules.iter().any(|m| m.kind.ends_with("models.Normalize"));
            (pooling, normalize)
        } else {
            (Pooling::Mean, false)
        };

        let sbert_path = dir.join("sentence_bert_config.json");
        let max_seq_length = if sbert_path.exists() {
            let file: SentenceBertFile = read_json(&sbert_path)?;
            file.max_seq_length.unwrap_or(bert.max_position_embeddings)
        } else {
            bert.max_position_embeddings
        };
        if max_seq_length == 0 || max_seq_length > bert.max_position_embeddings {
            return Err(EmbedError::BadConfig {
                path: sbert_path,
                message: format!(
                    "max_seq_length {max_seq_length} is outside 1..={}",
                    bert.max_position_embeddings
                ),
            });
        }
        Ok(Self {
            pooling,
            normalize,
            max_seq_length,
        })
    }
}

fn parse_pooling(path: &Path, file: &PoolingFile) -> Result<Pooling, EmbedError> {
    let modes = [
        ("cls", file.pooling_mode_cls_token),
        ("mean", file.pooling_mode_mean_tokens),
        ("max", file.pooling_mode_max_tokens),
        ("mean_sqrt_len", file.pooling_mode_mean_sqrt_len_tokens),
        ("weightedmean", file.pooling_mode_weightedmean_tokens),
        ("lasttoken", file.pooling_mode_lasttoken),
    ];
    let enabled: Vec<&str> = modes
        .iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect();
    match enabled.as_slice() {
        ["mean"] => Ok(Pooling::Mean),
        ["cls"] => Ok(Pooling::Cls),
        [] => Err(EmbedError::BadConfig {
            path: path.to_path_buf(),
            message: "no pooling mode is enabled".to_string(),
        }),
        // Several modes are concatenated by sentence-transformers.
        modes => Err(EmbedError::UnsupportedPooling {
            path: path.to_path_buf(),
            mode: modes.join("+"),
        }),
    }
}

pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, EmbedError> {
    let text = read_file(path)?;
    serde_json::from_str(&text).map_err(|e| EmbedError::BadConfig {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn read_file(path: &Path) -> Result<String, EmbedError> {
    std::fs::read_to_string(path).map_err(|source| io_error(path.to_path_buf(), source))
}

pub(crate) fn io_error(path: PathBuf, source: std::io::Error) -> EmbedError {
    if source.kind() == std::io::ErrorKind::NotFound {
        EmbedError::MissingFile { path }
    } else {
        EmbedError::Io { path, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM_CONFIG: &str = r#"{
        "architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 384,
        "intermediate_size": 1536, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
        "model_type": "bert", "num_attention_heads": 12, "num_hidden_layers": 6,
        "pad_token_id": 0, "position_embedding_type": "absolute", "type_vocab_size": 2,
        "vocab_size": 30522
    }"#;

    fn write(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn bert_with(field: &str, value: &str) -> Result<BertConfig, EmbedError> {
        let dir = tempfile::tempdir().unwrap();
        let mut json: serde_json::Value = serde_json::from_str(MINILM_CONFIG).unwrap();
        json[field] = serde_json::from_str(value).unwrap();
        write(dir.path(), "config.json", &json.to_string());
        BertConfig::load(&dir.path().join("config.json"))
    }

    fn pooling_file(modes: &[&str]) -> String {
        let fields: Vec<String> = modes
            .iter()
            .map(|m| format!("\"pooling_mode_{m}\": true"))
            .collect();
        format!(
            "{{\"word_embedding_dimension\": 384, {}}}",
            fields.join(", ")
        )
    }

    const MODULES: &str = r#"[
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
    ]"#;

    fn pipeline(files: &[(&str, &str)]) -> Result<PipelineConfig, EmbedError> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            write(dir.path(), name, text);
        }
        let bert: BertConfig = serde_json::from_str(MINILM_CONFIG).unwrap();
        PipelineConfig::load(dir.path(), &bert)
    }

    #[test]
    fn parses_minilm_config() {
        let config = bert_with("vocab_size", "30522").unwrap();
        assert_eq!(config.hidden_size, 384);
        assert_eq!(config.num_hidden_layers, 6);
        assert_eq!(config.head_dim(), 32);
        assert_eq!(config.layer_norm_eps, 1e-12);
    }

    #[test]
    fn rejects_unsupported_configs() {
        for (field, value, expect) in [
            ("hidden_act", "\"relu\"", "hidden_act"),
            ("num_attention_heads", "5", "not a multiple"),
            (
                "position_embedding_type",
                "\"relative_key\"",
                "position_embedding_type",
            ),
            ("model_type", "\"roberta\"", "model_type"),
            ("num_hidden_layers", "0", "num_hidden_layers is 0"),
            ("hidden_size", "\"big\"", "invalid type"),
        ] {
            let err = bert_with(field, value).unwrap_err();
            assert!(
                matches!(&err, EmbedError::BadConfig { message, .. } if message.contains(expect)),
                "{field}: {err}"
            );
        }
    }

    #[test]
    fn missing_config_is_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = BertConfig::load(&dir.path().join("config.json")).unwrap_err();
        assert!(matches!(&err, EmbedError::MissingFile { path } if path.ends_with("config.json")));
    }

    #[test]
    fn reads_the_sentence_transformers_modules() {
        let config = pipeline(&[
            ("modules.json", MODULES),
            ("1_Pooling/config.json", &pooling_file(&["mean_tokens"])),
            (
                "sentence_bert_config.json",
                r#"{"max_seq_length": 256, "do_lower_case": false}"#,
            ),
        ])
        .unwrap();
        assert_eq!(
            config,
            PipelineConfig {
                pooling: Pooling::Mean,
                normalize: true,
                max_seq_length: 256
            }
        );
        let cls = pipeline(&[
            (
                "modules.json",
                &MODULES
                    .replace("2_Normalize", "x")
                    .replace("models.Normalize", "models.Dense"),
            ),
            ("1_Pooling/config.json", &pooling_file(&["cls_token"])),
        ])
        .unwrap();
        assert_eq!(
            (cls.pooling, cls.normalize, cls.max_seq_length),
            (Pooling::Cls, false, 512)
        );
    }

    #[test]
    fn plain_transformers_folder_means_mean_pooling() {
        let config = pipeline(&[]).unwrap();
        assert_eq!(
            (config.pooling, config.normalize, config.max_seq_length),
            (Pooling::Mean, false, 512)
        );
    }

    #[test]
    fn pooling_errors() {
        let with_pooling = |text: &str| {
            pipeline(&[("modules.json", MODULES), ("1_Pooling/config.json", text)]).unwrap_err()
        };
        let err = with_pooling(&pooling_file(&["max_tokens"]));
        assert!(
            matches!(&err, EmbedError::UnsupportedPooling { mode, .. } if mode == "max"),
            "{err}"
        );
        let err = with_pooling(&pooling_file(&["cls_token", "mean_tokens"]));
        assert!(
            matches!(&err, EmbedError::UnsupportedPooling { mode, .. } if mode == "cls+mean"),
            "{err}"
        );
        let err = with_pooling(&pooling_file(&[]));
        assert!(matches!(err, EmbedError::BadConfig { .. }));
        let err = pipeline(&[("modules.json", MODULES)]).unwrap_err();
        assert!(
            matches!(&err, EmbedError::MissingFile { path } if path.ends_with("1_Pooling/config.json"))
        );
    }

    #[test]
    fn max_seq_length_must_fit_the_position_table() {
        let err =
            pipeline(&[("sentence_bert_config.json", r#"{"max_seq_length": 1024}"#)]).unwrap_err();
        assert!(err.to_string().contains("max_seq_length 1024"), "{err}");
    }
}
