//! The engine as callers see it: start it on a model, submit requests, read
//! their events, abort them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use candle_core::Device;
use mlxr_formats::gguf::GgufFile;
use mlxr_models::backend::cpu::paged::PagedKvStore;
use mlxr_models::{
    CpuBackend, DecoderModel, KvGeometry, ModelRunner, PartialHead, ReferenceBackend, StepRunner,
};
use mlxr_tokenizer::TokenId;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::config::EngineConfig;
use crate::engine::{Command, EngineLoop};
use crate::events::{Event, FinishReason, Timings, TokenLogprob, Usage};
use crate::kv::SeqId;
use crate::loaded_model::{file_key, kernels_for};
use crate::metrics::EngineMetrics;
use crate::request::GenerateRequest;
use crate::scheduler::Scheduler;
use crate::sequence::Sequence;
use crate::spec::draft_model::{check_compatible, DraftModel};
use crate::spec::frequent_tokens::frequent_tokens;
use crate::spec::{SpecOverrides, SpecType, Speculation};
use crate::DeviceChoice;
use crate::{EngineError, LoadedModel};

/// The model's forward pass with a KV cache of `num_blocks` blocks, on the
/// backend of the device its weights are on.
fn runner_for(
    lm: &LoadedModel,
    num_blocks: usize,
    block_size: usize,
    dtype: candle_core::DType,
) -> Result<Box<dyn StepRunner>, EngineError> {
    let kv = KvGeometry::new(lm.model.config(), num_blocks, block_size);
    Ok(match lm.model.device() {
        Device::Cpu => Box::new(ModelRunner::new(CpuBackend::new(kv, dtype)?)),
        #[cfg(feature = "cuda")]
        device @ Device::Cuda(_) => Box::new(ModelRunner::new(
            mlxr_models::backend::cuda::CudaBackend::new(kv, dtype, device)?,
        )),
        device => Box::new(ModelRunner::new(ReferenceBackend::new(kv, device)?)),
    })
}

/// Identifies a submitted request.
pub type RequestId = SeqId;

/// A running engine. Clones share it; the engine thread stops once every
/// handle is dropped and the requests in flight are done
/// ([`EngineHandle::shutdown`] waits for that).
#[derive(Clone)]
pub struct EngineHandle {
    commands: Sender<Command>,
    shared: Arc<Shared>,
}

struct Shared {
    model: Arc<LoadedModel>,
    metrics: Arc<EngineMetrics>,
    next_id: AtomicU64,
    seq_limit: usize,
    num_blocks: usize,
    block_size: usize,
    speculation: Speculation,
    /// The draft model, when one is loaded (`speculative.type: draft` is possible).
    draft: Option<Arc<LoadedModel>>,
    /// The tokens the draft model scores, when not all of them.
    draft_vocab: Option<usize>,
    worker: JoinHandle<()>,
}

/// Requests' default speculation: what the configuration sets; with a draft
/// model loaded and no type given, the draft model drafts (llama-server's
/// `--model-draft`), while an explicit `none` stays off.
fn default_speculation(
    configured: &SpecOverrides,
    has_draft: bool,
) -> Result<Speculation, EngineError> {
    let default_type = if has_draft {
        SpecType::Draft
    } else {
        SpecType::None
    };
    let speculation = Speculation::default().with(&SpecOverrides {
        spec_type: Some(configured.spec_type.unwrap_or(default_type)),
        ..*configured
    });
    checked(speculation, has_draft)
}

/// `speculation` if it is in range and its proposer is loaded.
fn checked(speculation: Speculation, has_draft: bool) -> Result<Speculation, EngineError> {
    speculation.validate().map_err(EngineError::Speculation)?;
    if speculation.spec_type == SpecType::Draft && speculation.n_max > 0 && !has_draft {
        return Err(EngineError::Speculation(
            "speculative.type draft needs a draft model, and none is loaded (start with \
             --model-draft FILE); speculative.type ngram needs none"
                .into(),
        ));
    }
    Ok(speculation)
}

/// The draft model's head over its `n` most frequent tokens, when a
/// ranking ships for its vocabulary and it is a GGUF file.
fn draft_head(lm: &LoadedModel, n: Option<usize>) -> Result<Option<PartialHead>, EngineError> {
    let Some(tokens) = n.and_then(|n| frequent_tokens(&lm.tokenizer, n)) else {
        return Ok(None);
    };
    if lm.path.is_dir() {
        return Ok(None);
    }
    let model_err = |source| EngineError::Model {
        path: lm.path.clone(),
        source,
    };
    let file = GgufFile::open(&lm.path).map_err(|source| EngineError::Open {
        path: lm.path.clone(),
        source,
    })?;
    let (config, device) = (lm.model.config(), lm.model.device());
    PartialHead::from_gguf(&file, config, device, kernels_for(device), tokens)
        .map(Some)
        .map_err(model_err)
}

impl EngineHandle {
    /// Allocates the KV cache from `config.kv_budget` and starts the engine thread.
    pub fn start(model: Arc<LoadedModel>, config: EngineConfig) -> Result<Self, EngineError> {
        Self::start_sharing(model, config, None)
    }

    /// [`Self::start`] with the draft model's weights already loaded
    /// (`draft_weights`, from `config.draft_model`'s file onto the model's
    /// device, e.g. those of an engine serving it).
    pub fn start_sharing(
        model: Arc<LoadedModel>,
        config: EngineConfig,
        draft_weights: Option<Arc<DecoderModel>>,
    ) -> Result<Self, EngineError> {
        let dtype = config.kv_dtype.dtype();
        let block_size = config.block_size.max(1);
        let speculation = default_speculation(&config.speculation, config.draft_model.is_some())?;
        let draft = match &config.draft_model {
            Some(path) => {
                let device = DeviceChoice::of(model.model.device());
                let context = Some(model.context_size);
                // A model drafting for itself reads its own weights.
                let same_file = file_key(path) == file_key(&model.path);
                let weights = draft_weights.or_else(|| same_file.then(|| model.model.clone()));
                let draft = LoadedModel::load_sharing(path, context, device, weights)?;
                check_compatible(&model, &draft)?;
                Some(Arc::new(draft))
            }
            None => None,
        };
        let block_bytes = |lm: &LoadedModel| {
            let c = lm.model.config();
            PagedKvStore::bytes_per_block(c.n_layers, block_size, c.n_kv_heads, c.head_dim, dtype)
                as u64
        };
        let per_block = block_bytes(&model) + draft.as_deref().map_or(0, block_bytes);
        // More than every sequence at full context would be wasted.
        let useful = (config.max_num_seqs.max(1) * model.context_size.div_ceil(block_size)) as u64;
        let num_blocks =
            (config.kv_budget.bytes_on(model.model.device()) / per_block).min(useful) as usize;
        if num_blocks == 0 {
            return Err(EngineError::KvBudgetTooSmall {
                budget: config.kv_budget.to_string(),
                block_bytes: per_block,
            });
        }
        let runner = runner_for(&model, num_blocks, block_size, dtype)?;
        let draft = match draft {
            Some(lm) => Some(DraftModel::new(
                lm.clone(),
                runner_for(&lm, num_blocks, block_size, dtype)?,
                draft_head(&lm, config.draft_vocab)?,
            )),
            None => None,
        };
        let seq_limit = draft
            .as_ref()
            .map_or(model.context_size, |d| d.model.context_size)
            .min(model.context_size)
            .min(num_blocks * block_size);
        let draft_model = draft.as_ref().map(|d| d.model.clone());
        let draft_vocab = draft
            .as_ref()
            .and_then(|d| d.head_tokens())
            .map(<[u32]>::len);
        let metrics = Arc::new(EngineMetrics::default());
        let (commands, rx) = mpsc::channel();
        let device = DeviceChoice::of(model.model.device());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let engine = EngineLoop {
            model: model.clone(),
            runner: Some(runner),
            block_size,
            scheduler: Scheduler::new(&config, num_blocks),
            streams: Default::default(),
            commands: rx,
            metrics: metrics.clone(),
            seq_limit,
            step: Default::default(),
            draft_tokens: Vec::new(),
            draft,
            costs: Default::default(),
            grammar_masks: config.grammar_masks.resolve(device),
            host_threads: config.sample_threads.unwrap_or(match device {
                DeviceChoice::Cpu => 1,
                _ => cores,
            }),
        };
        let worker = std::thread::Builder::new()
            .name("mlxr-engine".into())
            .spawn(move || engine.run())
            .map_err(EngineError::Thread)?;
        Ok(Self {
            commands,
            shared: Arc::new(Shared {
                model,
                metrics,
                next_id: AtomicU64::new(1),
                seq_limit,
                num_blocks,
                block_size,
                speculation,
                draft: draft_model,
                draft_vocab,
                worker,
            }),
        })
    }

    /// Drops this handle and, if it was the last (then it returns true),
    /// waits for the engine thread to finish its requests and free the model
    /// and KV cache: a command that exits next frees device memory before
    /// the process exit tears the device runtime down, not on the engine
    /// thread meanwhile.
    pub fn shutdown(self) -> bool {
        let EngineHandle { commands, shared } = self;
        drop(commands);
        match Arc::try_unwrap(shared) {
            Ok(shared) => {
                // A panic on the engine thread was reported there.
                let _ = shared.worker.join();
                true
            }
            Err(_) => false,
        }
    }

    pub fn model(&self) -> &Arc<LoadedModel> {
        &self.shared.model
    }

    /// The draft model, when the engine has one.
    pub fn draft_model(&self) -> Option<&Arc<LoadedModel>> {
        self.shared.draft.as_ref()
    }

    /// How many tokens the draft model scores, when not its whole
    /// vocabulary ([`crate::spec::frequent_tokens`]).
    pub fn draft_vocab(&self) -> Option<usize> {
        self.shared.draft_vocab
    }

    pub fn metrics(&self) -> &EngineMetrics {
        &self.shared.metrics
    }

    /// Tokens (prompt and reply) one request may reach.
    pub fn max_sequence_len(&self) -> usize {
        self.shared.seq_limit
    }

    /// KV blocks in the pool and tokens per block.
    pub fn kv_blocks(&self) -> (usize, usize) {
        (self.shared.num_blocks, self.shared.block_size)
    }

    /// Tokenizes and checks `req` here, on the caller's thread, then queues
    /// it. Errors (empty or oversized prompt, bad sampling parameters) come
    /// back at once; everything later arrives as events on the stream.
    pub fn submit(&self, req: &GenerateRequest) -> Result<RequestStream, EngineError> {
        let lm = &self.shared.model;
        let prompt = crate::request::tokenize_prompt(lm, req)?;
        if prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let vocab = lm.model.config().vocab_size;
        if let Some(&id) = prompt.iter().find(|&&t| t as usize >= vocab) {
            return Err(EngineError::InvalidToken { id, vocab });
        }
        if let Some(&(id, _)) = req
            .sampling
            .logit_bias
            .iter()
            .find(|(t, _)| *t as usize >= vocab)
        {
            return Err(EngineError::LogitBiasToken { id, vocab });
        }
        let limit = req
            .max_context
            .map_or(self.shared.seq_limit, |c| c.min(self.shared.seq_limit));
        if prompt.len() >= limit {
            return Err(EngineError::PromptTooLong {
                prompt: prompt.len(),
                context: limit,
            });
        }
        let room = limit - prompt.len();
        let max_tokens = match req.max_tokens {
            Some(n) if n > room => {
                return Err(EngineError::RequestTooLong {
                    prompt: prompt.len(),
                    max_tokens: n,
                    context: limit,
                })
            }
            Some(n) => n,
            None => room,
        };
        let speculation = checked(
            self.shared.speculation.with(&req.speculation),
            self.shared.draft.is_some(),
        )?;
        let constraint = req.constraint.as_ref().map(|c| lm.compile(c)).transpose()?;
        let id = SeqId(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let mut seq = Sequence::new(id, req, prompt.clone(), max_tokens, speculation)?
            .constrained(constraint);
        let (tx, rx) = unbounded_channel();
        if max_tokens == 0 {
            let _ = tx.send(seq.finish(FinishReason::Length, false));
        } else {
            self.commands
                .send(Command::Submit(Box::new(seq), tx))
                .map_err(|_| EngineError::Stopped)?;
        }
        Ok(RequestStream {
            id,
            prompt,
            events: rx,
        })
    }

    /// Stops a request now and frees its KV blocks; its stream ends with a
    /// `Cancelled` finish. Unknown or finished ids are ignored.
    pub fn abort(&self, id: RequestId) {
        let _ = self.commands.send(Command::Abort(id));
    }

    /// Submits `req` and waits for it on this thread, passing every event to
    /// `on_event`; returning `false` from it aborts the request.
    pub fn generate(
        &self,
        req: &GenerateRequest,
        mut on_event: impl FnMut(&Event) -> bool,
    ) -> Result<Generation, EngineError> {
        let mut stream = self.submit(req)?;
        let mut out = Generation::new(&stream);
        let mut aborted = false;
        while let Some(event) = stream.blocking_next() {
            if !on_event(&event) && !aborted {
                self.abort(stream.id());
                aborted = true;
            }
            if out.push(event)? {
                return Ok(out);
            }
        }
        Err(EngineError::Stopped)
    }
}

/// The events of one request, in order, ending with `Done` or `Error`.
/// Dropping it aborts the request.
pub struct RequestStream {
    id: RequestId,
    prompt: Vec<TokenId>,
    events: UnboundedReceiver<Event>,
}

impl RequestStream {
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The prompt's token ids.
    pub fn prompt_tokens(&self) -> &[TokenId] {
        &self.prompt
    }

    /// The next event, waiting on this thread (not inside an async runtime).
    pub fn blocking_next(&mut self) -> Option<Event> {
        self.events.blocking_recv()
    }

    /// The next event, awaited.
    pub async fn next(&mut self) -> Option<Event> {
        self.events.recv().await
    }
}

/// What a finished request produced, gathered from its events.
#[derive(Clone, Debug)]
pub struct Generation {
    pub id: RequestId,
    pub prompt_tokens: Vec<TokenId>,
    pub text: String,
    pub tokens: Vec<TokenId>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub timings: Timings,
    /// One entry per generated token when logprobs were requested.
    pub logprobs: Vec<(TokenLogprob, Vec<TokenLogprob>)>,
}

impl Generation {
    fn new(stream: &RequestStream) -> Self {
        Self {
            id: stream.id,
            prompt_tokens: stream.prompt.clone(),
            text: String::new(),
            tokens: Vec::new(),
            finish_reason: FinishReason::Length,
            usage: Usage::default(),
            timings: Timings::default(),
            logprobs: Vec::new(),
        }
    }

    /// Adds one event; true once the request is done.
    fn push(&mut self, event: Event) -> Result<bool, EngineError> {
        match event {
            Event::Token(t) => {
                self.tokens.push(t.id);
                self.text.push_str(&t.text);
                if let Some(lp) = t.logprob {
                    self.logprobs.push((lp, t.top_logprobs));
                }
                Ok(false)
            }
            Event::Done {
                finish_reason,
                text,
                usage,
                timings,
            } => {
                self.text.push_str(&text);
                self.finish_reason = finish_reason;
                self.usage = usage;
                self.timings = timings;
                Ok(true)
            }
            Event::Error(message) => Err(EngineError::Request(message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(spec_type: Option<SpecType>) -> SpecOverrides {
        SpecOverrides {
            spec_type,
            ..SpecOverrides::default()
        }
    }

    #[test]
    fn a_draft_model_drafts_unless_told_otherwise() {
        let resolve = |t, has_draft| default_speculation(&typed(t), has_draft).map(|s| s.spec_type);
        assert_eq!(resolve(None, true).unwrap(), SpecType::Draft);
        assert_eq!(resolve(None, false).unwrap(), SpecType::None);
        assert_eq!(resolve(Some(SpecType::None), true).unwrap(), SpecType::None);
        assert_eq!(
            resolve(Some(SpecType::Ngram), true).unwrap(),
            SpecType::Ngram
        );
        let err = resolve(Some(SpecType::Draft), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs a draft model"), "{err}");
        let too_long = SpecOverrides {
            n_max: Some(1000),
            ..SpecOverrides::default()
        };
        assert!(default_speculation(&too_long, false).is_err());
    }
}
