//! The engine thread: owns the model and its runner (the backend with the
//! paged KV cache), takes requests from a channel, and runs the scheduler's
//! steps, one forward pass each.

use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use mlxr_models::{Step as ForwardStep, StepRunner};
use tokio::sync::mpsc::UnboundedSender;

use crate::events::{Event, FinishReason};
use crate::grammar_masks::{self, GrammarMasks};
use crate::kv::SeqId;
use crate::metrics::{EngineGauges, EngineMetrics};
use crate::sampling::{self, SampleInputs};
use crate::scheduler::{ScheduledChunk, Scheduler};
use crate::sequence::{Sequence, Step};
use crate::spec::cost::StepCosts;
use crate::spec::draft_model::DraftModel;
use crate::LoadedModel;

pub(crate) enum Command {
    Submit(Box<Sequence>, UnboundedSender<Event>),
    Abort(SeqId),
}

pub(crate) struct EngineLoop {
    pub model: Arc<LoadedModel>,
    /// The model's forward pass on its backend, with the KV cache (taken
    /// out while a step's logits are sampled).
    pub runner: Option<Box<dyn StepRunner>>,
    /// Tokens per KV block.
    pub block_size: usize,
    pub scheduler: Scheduler,
    pub streams: std::collections::HashMap<SeqId, UnboundedSender<Event>>,
    pub commands: Receiver<Command>,
    pub metrics: Arc<EngineMetrics>,
    /// Tokens one sequence may reach: the context size or the KV capacity.
    pub seq_limit: usize,
    /// The current step's batch and metadata, reused every step.
    pub step: ForwardStep,
    /// One chunk's tokens, its draft included, while the step is built.
    pub draft_tokens: Vec<u32>,
    /// The draft model, with its own runner and KV cache (same block ids).
    pub draft: Option<DraftModel>,
    /// What target steps and draft passes have cost, for the draft lengths.
    pub costs: StepCosts,
    /// `Lazy` or `Ahead` (resolved for the model's device).
    pub grammar_masks: GrammarMasks,
    /// A step's per-sequence host work (masks ahead, sampling): on rayon's
    /// threads where more than one.
    pub host_threads: usize,
}

impl EngineLoop {
    /// Runs until every handle is dropped and the last request is done.
    pub fn run(mut self) {
        let mut handles_alive = true;
        loop {
            if self.scheduler.is_idle() {
                if !handles_alive {
                    return;
                }
                match self.commands.recv() {
                    Ok(cmd) => self.handle(cmd),
                    Err(_) => return,
                }
            }
            loop {
                match self.commands.try_recv() {
                    Ok(cmd) => self.handle(cmd),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        handles_alive = false;
                        break;
                    }
                }
            }
            self.drop_abandoned();
            // Published before the step too, so a request whose first token
            // has gone out is never missing from the gauges.
            self.publish_gauges();
            if !self.scheduler.is_idle() {
                // A bug that panics inside a step fails the requests in
                // flight, not the engine: later requests are still served.
                let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.step()));
                if let Err(panic) = step {
                    self.fail_all(&panic_message(panic.as_ref()));
                }
            }
            self.publish_gauges();
        }
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Submit(seq, events) => {
                self.streams.insert(seq.id, events);
                self.scheduler.add(*seq);
            }
            Command::Abort(id) => self.finish(id, FinishReason::Cancelled),
        }
    }

    /// Requests whose receiver is gone (a client that disconnected) are aborted.
    fn drop_abandoned(&mut self) {
        let gone: Vec<SeqId> = self
            .streams
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.finish(id, FinishReason::Cancelled);
        }
    }

    fn fail_all(&mut self, why: &str) {
        let message = format!("internal error in the engine: {why}");
        for (id, tx) in std::mem::take(&mut self.streams) {
            self.scheduler.remove(id);
            let _ = tx.send(Event::Error(message.clone()));
        }
    }

    fn finish(&mut self, id: SeqId, reason: FinishReason) {
        if let Some(mut seq) = self.scheduler.remove(id) {
            let done = seq.finish(reason, true);
            self.finished(&seq, done);
        }
    }

    fn finished(&mut self, seq: &Sequence, done: Event) {
        if let Event::Done {
            finish_reason,
            timings,
            ..
        } = &done
        {
            self.metrics.observe_finished(
                *finish_reason,
                timings.queued_ms / 1000.0,
                seq.arrived_at().elapsed().as_secs_f64(),
            );
        }
        if let Some(tx) = self.streams.remove(&seq.id) {
            let _ = tx.send(done);
        }
    }

    fn step(&mut self) {
        let mut chunks = self.scheduler.schedule(&self.costs);
        if chunks.is_empty() {
            // Admission checks make this unreachable; never spin on it.
            std::thread::sleep(std::time::Duration::from_millis(1));
            return;
        }
        if let Some(draft) = &mut self.draft {
            match draft.draft(&mut self.scheduler, &mut chunks, self.block_size) {
                Ok(passes) => self.costs.observe_draft(passes.steady, passes.secs),
                Err(e) => {
                    self.fail_chunks(&chunks, &format!("draft model: {e}"));
                    return;
                }
            }
        }
        let mut step = std::mem::take(&mut self.step);
        step.clear();
        for c in &chunks {
            let seq = self
                .scheduler
                .seq(c.seq)
                .expect("scheduled sequences exist");
            let table = self.scheduler.block_table(c.seq).iter().map(|b| b.0);
            let end = c.start_pos + c.len - c.draft;
            self.draft_tokens.clear();
            self.draft_tokens
                .extend_from_slice(&seq.tokens[c.start_pos..end]);
            self.draft_tokens.extend_from_slice(&seq.draft[..c.draft]);
            step.push_scored(&self.draft_tokens, c.start_pos, table, 1 + c.draft);
        }
        let model = self.model.clone();
        let mut runner = self
            .runner
            .take()
            .expect("the runner is back after each step");
        let start = Instant::now();
        let logits = match step.finish(self.block_size) {
            Ok(()) if self.grammar_masks == GrammarMasks::Ahead => std::thread::scope(|s| {
                let (scheduler, chunks) = (&mut self.scheduler, &chunks);
                let threads = self.host_threads;
                s.spawn(move || grammar_masks::compute_ahead(scheduler, chunks, threads));
                runner.execute(&model.model, &step)
            }),
            Ok(()) => runner.execute(&model.model, &step),
            Err(e) => Err(e),
        };
        let query_rows = chunks.iter().map(|c| c.len).sum();
        self.costs
            .observe_target(query_rows, start.elapsed().as_secs_f64());
        match logits {
            Ok(rows) => self.process_outputs(&chunks, rows),
            Err(e) => self.fail_chunks(&chunks, &format!("forward pass failed: {e}")),
        }
        self.runner = Some(runner);
        self.step = step;
    }

    /// The requests of `chunks` end with an error event.
    fn fail_chunks(&mut self, chunks: &[ScheduledChunk], message: &str) {
        for c in chunks {
            self.scheduler.remove(c.seq);
            if let Some(tx) = self.streams.remove(&c.seq) {
                let _ = tx.send(Event::Error(message.to_string()));
            }
        }
    }

    /// `logits`: one row per chunk, `1 + draft` for a chunk that verifies
    /// a draft, `[rows, vocab]` row-major.
    fn process_outputs(&mut self, chunks: &[ScheduledChunk], logits: &[f32]) {
        let vocab = self.model.model.config().vocab_size;
        let mut all_rows = logits.chunks_exact(vocab);
        let rows: Vec<Vec<&[f32]>> = chunks
            .iter()
            .map(|c| all_rows.by_ref().take(1 + c.draft).collect())
            .collect();
        let inputs = SampleInputs {
            chunks,
            rows: &rows,
            tokenizer: &self.model.tokenizer,
            context_limit: self.seq_limit,
        };
        let sampled = sampling::sample_all(&mut self.scheduler, &inputs, self.host_threads);
        for (chunk, sampled) in chunks.iter().zip(sampled) {
            if !chunk.samples {
                self.scheduler.chunk_computed(chunk, 0);
                continue;
            }
            let Some(sampled) = sampled else { continue };
            let now = Instant::now();
            match sampled.previous {
                Some(t) => self
                    .metrics
                    .observe_inter_token(now.duration_since(t).as_secs_f64()),
                None => {
                    let seq = self.scheduler.seq(chunk.seq).expect("sampled above");
                    self.metrics
                        .observe_ttft(now.duration_since(seq.arrived_at()).as_secs_f64());
                    self.metrics.add_prompt_tokens(seq.prompt_len);
                }
            }
            self.metrics.add_generation_tokens(sampled.steps.len());
            if sampled.speculated {
                self.metrics.observe_draft(chunk.draft, sampled.accepted);
            }
            self.scheduler.chunk_computed(chunk, sampled.accepted);
            for step in sampled.steps {
                let (token, done) = match step {
                    Step::Continue(event) => (Some(event), None),
                    Step::Finished(event, done) => (event, Some(done)),
                };
                if let (Some(event), Some(tx)) = (token, self.streams.get(&chunk.seq)) {
                    let _ = tx.send(event);
                }
                if let Some(done) = done {
                    let seq = self
                        .scheduler
                        .remove(chunk.seq)
                        .expect("sequence sampled above");
                    self.finished(&seq, done);
                }
            }
        }
    }

    fn publish_gauges(&self) {
        let blocks = self.scheduler.blocks();
        let stats = blocks.stats();
        self.metrics.set_gauges(EngineGauges {
            running: self.scheduler.num_running(),
            waiting: self.scheduler.num_waiting(),
            kv_cache_usage: blocks.usage(),
            prefix_cache_queries: stats.queries,
            prefix_cache_hits: stats.hits,
            preemptions: self.scheduler.num_preemptions(),
        });
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
