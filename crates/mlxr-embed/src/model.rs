//! `EmbeddingModel`: a loaded sentence-transformers folder (tokenizer, encoder,
//! pooling) and batched embedding of texts.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{Encoding, PostProcessor, Tokenizer, TruncationDirection};

use crate::config::{io_error, BertConfig, PipelineConfig};
use crate::encoder::BertEncoder;
use crate::error::EmbedError;
use crate::pooling::{l2_normalize, Pooling};

/// Texts per forward pass. Texts are sorted by length first, so a batch pads
/// little.
const BATCH_SIZE: usize = 32;

/// The result of [`EmbeddingModel::embed`].
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// One vector per input text, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens the encoder read (special tokens included, after truncation).
    pub prompt_tokens: usize,
}

pub struct EmbeddingModel {
    /// The folder's name, e.g. "all-MiniLM-L6-v2".
    pub name: String,
    tokenizer: Tokenizer,
    /// Special tokens the tokenizer's post-processor adds to one text.
    special_tokens: usize,
    encoder: BertEncoder,
    pipeline: PipelineConfig,
    hidden_size: usize,
    device: Device,
}

impl EmbeddingModel {
    /// Loads a sentence-transformers BERT folder: config.json,
    /// model.safetensors, tokenizer.json and the optional modules.json,
    /// 1_Pooling/config.json and sentence_bert_config.json.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let device = Device::Cpu;
        let bert = BertConfig::load(&dir.join("config.json"))?;
        let pipeline = PipelineConfig::load(dir, &bert)?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        let special_tokens = tokenizer
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false));
        if pipeline.max_seq_length <= special_tokens {
            return Err(EmbedError::BadConfig {
                path: dir.join("sentence_bert_config.json"),
                message: format!(
                    "max_seq_length {} leaves no room beside {special_tokens} special tokens",
                    pipeline.max_seq_length
                ),
            });
        }
        let weights_path = dir.join("model.safetensors");
        let weights_error = |source| EmbedError::Weights {
            path: weights_path.clone(),
            source,
        };
        if !weights_path.exists() {
            return Err(EmbedError::MissingFile { path: weights_path });
        }
        let tensors =
            candle_core::safetensors::load(&weights_path, &device).map_err(weights_error)?;
        let vb = weights_root(tensors, &device);
        let encoder = BertEncoder::load(vb, &bert).map_err(weights_error)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            name,
            tokenizer,
            special_tokens,
            encoder,
            pipeline,
            hidden_size: bert.hidden_size,
            device,
        })
    }

    /// Length of every vector.
    pub fn dimensions(&self) -> usize {
        self.hidden_size
    }

    /// Longest input in tokens, special tokens included.
    pub fn max_tokens(&self) -> usize {
        self.pipeline.max_seq_length
    }

    pub fn pooling(&self) -> Pooling {
        self.pipeline.pooling
    }

    pub fn normalizes(&self) -> bool {
        self.pipeline.normalize
    }

    /// Embeds `texts`. An input longer than [`Self::max_tokens`] is cut to it
    /// when `truncate` is set (keeping its start), else it is an error.
    pub fn embed(&self, texts: &[&str], truncate: bool) -> Result<Embeddings, EmbedError> {
        let encodings = texts
            .iter()
            .enumerate()
            .map(|(index, text)| self.tokenize(index, text, truncate))
            .collect::<Result<Vec<_>, _>>()?;
        let prompt_tokens = encodings.iter().map(Vec::len).sum();

        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH_SIZE) {
            let ids: Vec<&[u32]> = batch.iter().map(|&i| encodings[i].as_slice()).collect();
            for (&i, vector) in batch.iter().zip(self.embed_batch(&ids)?) {
                vectors[i] = vector;
            }
        }
        Ok(Embeddings {
            vectors,
            prompt_tokens,
        })
    }

    /// Token ids of one text with the special tokens, within max_tokens.
    fn tokenize(&self, index: usize, text: &str, truncate: bool) -> Result<Vec<u32>, EmbedError> {
        let tokenize_error = |e: tokenizers::Error| EmbedError::Tokenize {
            index,
            message: e.to_string(),
        };
        let mut encoding: Encoding = self.tokenizer.encode(text, false).map_err(tokenize_error)?;
        let limit = self.max_tokens();
        let tokens = encoding.len() + self.special_tokens;
        if tokens > limit {
            if !truncate {
                return Err(EmbedError::InputTooLong {
                    index,
                    tokens,
                    limit,
                });
            }
            encoding.truncate(limit - self.special_tokens, 0, TruncationDirection::Right);
        }
        let encoding = self
            .tokenizer
            .post_process(encoding, None, true)
            .map_err(tokenize_error)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// One forward pass over texts padded to the longest; pooled vectors.
    fn embed_batch(&self, ids: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let seq = ids.iter().map(|t| t.len()).max().unwrap_or(0);
        let hidden = self.hidden_size;
        let mut padded_ids = Vec::with_capacity(ids.len() * seq);
        let mut mask = Vec::with_capacity(ids.len() * seq);
        for tokens in ids {
            // Padding positions are masked out, so the padding id is irrelevant.
            padded_ids.extend(tokens.iter().copied().chain(std::iter::repeat(0)).take(seq));
            mask.extend((0..seq).map(|p| if p < tokens.len() { 1f32 } else { 0f32 }));
        }
        let input_ids = Tensor::from_vec(padded_ids, (ids.len(), seq), &self.device)?;
        let attention_mask = Tensor::from_vec(mask, (ids.len(), seq), &self.device)?;
        let states = self.encoder.forward(&input_ids, &attention_mask)?;
        let states = states.flatten_all()?.to_vec1::<f32>()?;

        Ok(ids
            .iter()
            .zip(states.chunks_exact(seq * hidden))
            .map(|(tokens, text_states)| {
                let mut vector = self
                    .pipeline
                    .pooling
                    .pool(text_states, hidden, tokens.len());
                if self.pipeline.normalize {
                    l2_normalize(&mut vector);
                }
                vector
            })
            .collect())
    }
}

fn load_tokenizer(path: &Path) -> Result<Tokenizer, EmbedError> {
    let json = std::fs::read_to_string(path).map_err(|e| io_error(path.to_path_buf(), e))?;
    let mut tokenizer: Tokenizer =
        json.parse()
            .map_err(|e: tokenizers::Error| EmbedError::LoadTokenizer {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
    // tokenizer.json files often carry truncation (128 for all-MiniLM-L6-v2)
    // and fixed-length padding; this crate does both itself.
    tokenizer
        .with_truncation(None)
        .map_err(|e| EmbedError::LoadTokenizer {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?
        .with_padding(None);
    Ok(tokenizer)
}

/// A VarBuilder over the encoder's tensors, whether they are stored as
/// "bert.embeddings..." (BertForX checkpoints) or "embeddings..." (BertModel).
fn weights_root(tensors: HashMap<String, Tensor>, device: &Device) -> VarBuilder<'static> {
    let prefixed = tensors.keys().any(|k| k.starts_with("bert."));
    let vb = VarBuilder::from_tensors(tensors, DType::F32, device);
    if prefixed {
        vb.pp("bert")
    } else {
        vb
    }
}
