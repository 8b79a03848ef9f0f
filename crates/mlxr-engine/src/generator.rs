//! One sequence from prompt to finish: prefill, then sample and decode token
//! by token, streaming events.

use std::time::Instant;

use candle_core::Tensor;
use mlxr_models::{ContiguousKvCache, SeqChunk};
use mlxr_sampling::{Sampler, StopMatcher};
use mlxr_tokenizer::{StreamDecoder, TokenId};

use crate::events::{Event, FinishReason, Timings, TokenEvent, TokenLogprob, Usage};
use crate::request::{GenerateRequest, Prompt};
use crate::{EngineError, LoadedModel};

/// Prompt tokens per forward pass while prefilling (llama.cpp's default micro-batch).
const PREFILL_CHUNK: usize = 512;

/// What a finished generation produced.
#[derive(Clone, Debug)]
pub struct Generation {
    pub text: String,
    pub tokens: Vec<TokenId>,
    pub prompt_tokens: Vec<TokenId>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    pub timings: Timings,
    /// One entry per generated token when logprobs were requested.
    pub logprobs: Vec<(TokenLogprob, Vec<TokenLogprob>)>,
}

/// A sequence's KV cache kept between requests, so a chat that grows turn by
/// turn only prefills what is new.
pub struct Session {
    cache: ContiguousKvCache,
    cached: Vec<TokenId>,
}

impl Session {
    pub fn new(model: &LoadedModel) -> Self {
        Self {
            cache: ContiguousKvCache::new(model.model.config().n_layers),
            cached: Vec::new(),
        }
    }

    /// Runs `req` to the end. `on_event` sees every event; returning `false`
    /// cancels the generation after the current token.
    pub fn generate(
        &mut self,
        lm: &LoadedModel,
        req: &GenerateRequest,
        mut on_event: impl FnMut(&Event) -> bool,
    ) -> Result<Generation, EngineError> {
        let prompt = tokenize_prompt(lm, &req.prompt)?;
        if prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if prompt.len() >= lm.context_size {
            return Err(EngineError::PromptTooLong {
                prompt: prompt.len(),
                context: lm.context_size,
            });
        }
        let mut sampler = Sampler::new(req.sampling.clone())?;
        let mut stop = StopMatcher::new(req.stop.clone());
        let mut decoder = StreamDecoder::new();

        // Reuse the longest cached prefix, but always recompute the last prompt
        // token: its logits start the reply.
        let reused = common_prefix(&self.cached, &prompt).min(prompt.len() - 1);
        self.cache.truncate(reused);
        self.cached.truncate(reused);

        let started = Instant::now();
        let mut logits = Vec::new();
        for chunk in prompt[reused..].chunks(PREFILL_CHUNK) {
            logits = self.step(lm, chunk)?;
        }
        let prompt_ms = ms_since(started);

        let mut history = prompt.clone();
        let mut out = Generation {
            text: String::new(),
            tokens: Vec::new(),
            prompt_tokens: prompt.clone(),
            finish_reason: FinishReason::Length,
            usage: Usage {
                prompt_tokens: prompt.len(),
                cached_tokens: reused,
                completion_tokens: 0,
            },
            timings: Timings::default(),
            logprobs: Vec::new(),
        };
        let decode_started = Instant::now();
        let max_tokens = req.max_tokens.unwrap_or(usize::MAX);
        let mut stop_string_hit = false;
        let finish = loop {
            if out.tokens.len() >= max_tokens {
                break FinishReason::Length;
            }
            let sampled = sampler.sample(&logits, &history);
            let id = sampled.token;
            out.tokens.push(id);
            history.push(id);
            let is_eog = lm.tokenizer.is_eog(id) && !req.ignore_eos;
            let piece = if is_eog {
                String::new()
            } else {
                decoder.push(&lm.tokenizer, id)
            };
            let update = stop.push(&piece);
            let event = TokenEvent {
                id,
                text: update.emit,
                logprob: req
                    .sampling
                    .logprobs
                    .map(|_| logprob(lm, id, sampled.logprob)),
                top_logprobs: sampled
                    .top_logprobs
                    .iter()
                    .map(|&(t, lp)| logprob(lm, t, lp))
                    .collect(),
            };
            out.text.push_str(&event.text);
            if let Some(lp) = &event.logprob {
                out.logprobs.push((lp.clone(), event.top_logprobs.clone()));
            }
            let keep_going = on_event(&Event::Token(event));
            stop_string_hit = update.stopped;
            if is_eog || update.stopped {
                break FinishReason::Stop;
            }
            if !keep_going {
                break FinishReason::Cancelled;
            }
            if history.len() >= lm.context_size || out.tokens.len() >= max_tokens {
                break FinishReason::Length;
            }
            logits = self.step(lm, &[id])?;
        };

        // A stop string swallows everything after it; otherwise flush what was held back.
        let tail = if stop_string_hit {
            String::new()
        } else {
            let rest = stop.push(&decoder.finish()).emit;
            rest + &stop.finish()
        };
        out.text.push_str(&tail);
        out.finish_reason = finish;
        out.usage.completion_tokens = out.tokens.len();
        out.timings = Timings {
            prompt_n: prompt.len() - reused,
            prompt_ms,
            predicted_n: out.tokens.len(),
            predicted_ms: ms_since(decode_started),
        };
        on_event(&Event::Done {
            finish_reason: finish,
            text: tail,
            usage: out.usage,
            timings: out.timings,
        });
        Ok(out)
    }

    /// Feeds `tokens` after what the cache holds; returns the last token's logits.
    fn step(&mut self, lm: &LoadedModel, tokens: &[TokenId]) -> Result<Vec<f32>, EngineError> {
        let start_pos = self.cached.len();
        let seqs = [SeqChunk::new(start_pos, tokens.len())];
        let logits: Tensor = lm.model.forward(tokens, &seqs, &mut self.cache)?;
        self.cached.extend_from_slice(tokens);
        Ok(logits
            .squeeze(0)
            .and_then(|l| l.to_vec1::<f32>())
            .map_err(mlxr_models::ModelError::from)?)
    }
}

pub fn tokenize_prompt(lm: &LoadedModel, prompt: &Prompt) -> Result<Vec<TokenId>, EngineError> {
    Ok(match prompt {
        Prompt::Raw(text) => lm.tokenizer.encode(text, true, true),
        Prompt::Chat(messages) => lm.tokenizer.encode(&lm.render_chat(messages)?, true, true),
        Prompt::Tokens(ids) => ids.clone(),
    })
}

fn logprob(lm: &LoadedModel, id: TokenId, logprob: f32) -> TokenLogprob {
    TokenLogprob {
        id,
        token: String::from_utf8_lossy(&lm.tokenizer.token_to_piece(id, true)).into_owned(),
        logprob,
    }
}

fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}
