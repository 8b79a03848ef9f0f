//! A model file opened for inference: weights, tokenizer and chat template.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use candle_core::Device;
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{DecoderModel, RowOrder};
use mlxr_structured::{Constraint, Grammars, StructuredError, TokenConstraint};
use mlxr_template::{ChatMessage, ChatTemplate, RenderOptions};
use mlxr_tokenizer::{TokenId, Tokenizer};

use crate::{DeviceChoice, EngineError};

/// The engine batches requests: each row's arithmetic must not depend on
/// what else is in the batch (batched equals alone). Other devices than the
/// CPU take the weights in candle's form.
pub(crate) fn kernels_for(device: &Device) -> Option<RowOrder> {
    device.is_cpu().then_some(RowOrder::Independent)
}

pub struct LoadedModel {
    pub path: PathBuf,
    /// The weights, which another engine loaded from the same file may share.
    pub model: Arc<DecoderModel>,
    /// Shared with the grammar machinery (its forced tokens are encoded
    /// as this tokenizer does).
    pub tokenizer: Arc<Tokenizer>,
    pub template: ChatTemplate,
    /// Tokens one sequence may hold (prompt and reply together).
    pub context_size: usize,
    /// Built at the first constrained request (a fraction of a second).
    grammars: OnceLock<Result<Grammars, String>>,
}

impl LoadedModel {
    /// Opens a GGUF file, or a Hugging Face / MLX model folder, on the CPU.
    /// `context_size`: `None` for the model's trained context.
    pub fn load(path: &Path, context_size: Option<usize>) -> Result<Self, EngineError> {
        Self::load_on(path, context_size, DeviceChoice::Cpu)
    }

    /// [`Self::load`] with the weights on `device`.
    pub fn load_on(
        path: &Path,
        context_size: Option<usize>,
        device: DeviceChoice,
    ) -> Result<Self, EngineError> {
        Self::load_sharing(path, context_size, device, None)
    }

    /// [`Self::load_on`], taking `weights` (already loaded from the same
    /// file onto the same device, e.g. by the engine that serves a draft
    /// model) instead of loading them again; tokenizer and template come
    /// from the file.
    pub fn load_sharing(
        path: &Path,
        context_size: Option<usize>,
        device: DeviceChoice,
        weights: Option<Arc<DecoderModel>>,
    ) -> Result<Self, EngineError> {
        let device = device.candle()?;
        if path.is_dir() {
            return Self::load_dir(path, context_size, &device, weights);
        }
        let path = path.to_path_buf();
        let file = GgufFile::open(&path).map_err(|source| EngineError::Open {
            path: path.clone(),
            source,
        })?;
        let model_err = |source| EngineError::Model {
            path: path.clone(),
            source,
        };
        file.check_supported()
            .map_err(|e| model_err(mlxr_models::ModelError::Gguf(e)))?;
        let tokenizer =
            Tokenizer::from_gguf(file.metadata()).map_err(|source| EngineError::Tokenizer {
                path: path.clone(),
                source,
            })?;
        let template = match file.metadata().opt_str("tokenizer.chat_template") {
            Ok(Some(source)) => template_for(&tokenizer, source)?,
            _ => ChatTemplate::fallback(),
        };
        let kernels = kernels_for(&device);
        let model = match weights {
            Some(weights) => weights,
            None => Arc::new(
                DecoderModel::load_with_kernels(&file, &device, kernels).map_err(model_err)?,
            ),
        };
        Ok(Self::new(path, model, tokenizer, template, context_size))
    }

    /// A folder with `config.json`, safetensors weights and `tokenizer.json`.
    fn load_dir(
        dir: &Path,
        context_size: Option<usize>,
        device: &Device,
        weights: Option<Arc<DecoderModel>>,
    ) -> Result<Self, EngineError> {
        let path = dir.to_path_buf();
        let tokenizer_err = |source| EngineError::Tokenizer {
            path: path.clone(),
            source,
        };
        let tokenizer = Tokenizer::from_hf_dir(dir).map_err(tokenizer_err)?;
        let template = match mlxr_tokenizer::hf_chat_template(dir).map_err(tokenizer_err)? {
            Some(source) => template_for(&tokenizer, &source)?,
            None => ChatTemplate::fallback(),
        };
        let model = match weights {
            Some(weights) => weights,
            None => Arc::new(DecoderModel::load_dir(dir, device).map_err(|source| {
                EngineError::Model {
                    path: path.clone(),
                    source,
                }
            })?),
        };
        Ok(Self::new(path, model, tokenizer, template, context_size))
    }

    fn new(
        path: PathBuf,
        model: Arc<DecoderModel>,
        tokenizer: Tokenizer,
        template: ChatTemplate,
        context_size: Option<usize>,
    ) -> Self {
        let trained = model.config().context_length;
        Self {
            path,
            context_size: context_size.unwrap_or(trained).min(trained).max(1),
            model,
            tokenizer: Arc::new(tokenizer),
            template,
            grammars: OnceLock::new(),
        }
    }

    /// `constraint` compiled against this model's vocabulary.
    pub fn compile(&self, constraint: &Constraint) -> Result<TokenConstraint, StructuredError> {
        match self.grammars() {
            Ok(grammars) => grammars.compile(constraint),
            Err(e) => Err(StructuredError::Matcher(e.clone())),
        }
    }

    fn grammars(&self) -> &Result<Grammars, String> {
        self.grammars.get_or_init(|| {
            Grammars::new(&self.tokenizer, self.model.config().vocab_size)
                .map_err(|e| e.to_string())
        })
    }

    /// Builds the grammar machinery (the vocabulary's token trie: 0.5-1.5 s
    /// of one core for 50k-150k tokens) on a low-priority thread, so that a
    /// server's first constrained request does not wait for it; a request
    /// that comes sooner waits for this build, not a second one.
    pub fn prepare_grammars_in_background(self: &Arc<Self>) {
        let lm = Arc::clone(self);
        let _ = std::thread::Builder::new()
            .name("mlxr-grammars".into())
            .spawn(move || {
                // Linux: the calling thread's own niceness.
                #[cfg(target_os = "linux")]
                // SAFETY: setpriority reads no memory of ours.
                unsafe {
                    libc::setpriority(libc::PRIO_PROCESS, 0, 10);
                }
                let _ = lm.grammars();
            });
    }

    /// Replaces the file's chat template (a Jinja source, e.g. from a Modelfile).
    pub fn set_chat_template(&mut self, source: &str) -> Result<(), EngineError> {
        self.template = template_for(&self.tokenizer, source)?;
        Ok(())
    }

    /// The prompt `messages` become with another chat template (Jinja),
    /// e.g. one given with a single request.
    pub fn render_chat_with(
        &self,
        source: &str,
        messages: &[ChatMessage],
    ) -> Result<String, EngineError> {
        Ok(template_for(&self.tokenizer, source)?.render(messages, true)?)
    }

    /// The prompt a chat request becomes, as text.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> Result<String, EngineError> {
        self.render_chat_tools(messages, &[])
    }

    /// [`Self::render_chat`] with tool definitions for the template's
    /// `tools` (none when empty).
    pub fn render_chat_tools(
        &self,
        messages: &[ChatMessage],
        tools: &[serde_json::Value],
    ) -> Result<String, EngineError> {
        let options = RenderOptions {
            add_generation_prompt: true,
            tools: (!tools.is_empty()).then(|| tools.to_vec()),
            ..RenderOptions::default()
        };
        Ok(self.template.render_with(messages, &options)?)
    }
}

/// One key for every way of naming a file (what weights are shared by).
pub fn file_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn template_for(tokenizer: &Tokenizer, source: &str) -> Result<ChatTemplate, EngineError> {
    let text = |id: Option<TokenId>| {
        id.and_then(|id| tokenizer.token_text(id))
            .unwrap_or_default()
            .to_string()
    };
    Ok(ChatTemplate::new(
        source,
        &text(tokenizer.bos()),
        &text(tokenizer.eos()),
    )?)
}
