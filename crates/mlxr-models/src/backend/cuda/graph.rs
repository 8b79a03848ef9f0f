//! Decode steps recorded once as CUDA graphs and replayed: a step of an 8B
//! model is some 400 small launches, each costing the host more than the
//! GPU's work in it; a replay is one launch.
//!
//! A step of B sequences of one token each (B ≤ [`MAX_RECORDED`]) runs
//! plainly the first time (loading any kernel module it needs, and leaving
//! the shapes and strides candle's ops upload on the device: a recording
//! that copied from host memory would read it again, long freed, at each
//! replay), is recorded the second time and replayed from then on. What a
//! recorded step reads from the host (token ids, RoPE tables, slots, block
//! tables) sits in step buffers whose addresses stay put
//! ([`super::super::step_buffer`]), copied before each replay; the
//! attention's launch shape does not depend on the context. When a step
//! buffer moves, the records are dropped.
//!
//! The graphs own the memory of the tensors made while recording (graph
//! allocations, freed and made again at each launch at the same
//! addresses); the logits tensor of a record is kept with it and read after
//! each replay.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use candle_core::cuda_backend::cudarc::driver::sys::{
    CUgraphInstantiate_flags, CUstreamCaptureMode,
};
use candle_core::cuda_backend::cudarc::driver::{CudaGraph, CudaStream};
use candle_core::cuda_backend::WrapErr;
use candle_core::{Device, Tensor};

use crate::backend::candle::Replay;
use crate::step::Step;
use crate::{ModelError, Result};

/// The largest decode batch recorded (by default; `set_most` lowers it):
/// bigger ones run plainly. Each size is a graph with its own activations,
/// made at its second occurrence, and keeps its logits between launches
/// (64 sequences of a 49,152-word vocabulary: 12.6 MB).
pub const MAX_RECORDED: usize = 64;
/// The largest decode batch recorded unless `MLXR_CUDA_GRAPH_ROWS` says
/// otherwise. On an H100 (8B-shaped Q4_K_M, forward pass alone, 128-token
/// contexts) recording steps of 16 sequences took them from 11.7 to 9.0 ms,
/// of 64 from 16.4 to 15.2 ms; the host took 7.3-7.8 ms to enqueue one
/// unrecorded (bench/results/gpu-2026-12-06-s49.md).
pub const RECORDED: usize = MAX_RECORDED;

/// Whether decode steps are recorded and replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StepGraphs {
    #[default]
    Replay,
    Off,
}

struct Recorded {
    // Dropped before the graph: a graph allocation may be freed outside
    // its graph.
    logits: Tensor,
    graph: CudaGraph,
}

// SAFETY: a CUDA graph may be used from any thread as long as calls on it are
// serialized (CUDA's "graph thread safety"); a `Recorded` is reached only
// through the `&mut` of the backend that owns it, one thread at a time.
unsafe impl Send for Recorded {}

pub struct Graphs {
    mode: StepGraphs,
    /// The largest step recorded.
    most: usize,
    stream: Arc<CudaStream>,
    recorded: HashMap<usize, Recorded>,
    seen: HashSet<usize>,
    refused: HashSet<usize>,
    /// The step buffers' moves when the records were made.
    moves: u64,
    recording: Option<usize>,
}

impl Graphs {
    pub fn new(device: &Device, mode: StepGraphs) -> Result<Self> {
        Ok(Self {
            mode,
            most: RECORDED,
            stream: device.as_cuda_device()?.cuda_stream(),
            recorded: HashMap::new(),
            seen: HashSet::new(),
            refused: HashSet::new(),
            moves: 0,
            recording: None,
        })
    }

    pub fn set_mode(&mut self, mode: StepGraphs) {
        self.mode = mode;
    }

    /// Records steps of up to `rows` sequences (at most [`MAX_RECORDED`]).
    pub fn set_most(&mut self, rows: usize) {
        self.most = rows.min(MAX_RECORDED);
    }

    /// Replays the record for `step` if there is one (`moves`: the step
    /// buffers' moves so far), or says whether to record it.
    pub fn replay(&mut self, step: &Step, moves: u64) -> Result<Replay> {
        let tokens = step.tokens().len();
        let decode = tokens > 0 && tokens == step.seqs().len();
        if self.mode == StepGraphs::Off || !decode || tokens > self.most {
            return Ok(Replay::Run);
        }
        if moves != self.moves {
            // The records read addresses that are gone.
            self.stream.synchronize().w()?;
            self.recorded.clear();
            self.moves = moves;
        }
        if let Some(r) = self.recorded.get(&tokens) {
            r.graph.launch().w()?;
            return Ok(Replay::Done(r.logits.clone()));
        }
        if self.refused.contains(&tokens) {
            return Ok(Replay::Run);
        }
        if self.seen.insert(tokens) {
            return Ok(Replay::Warm);
        }
        Ok(Replay::Record)
    }

    pub fn begin_record(&mut self, step: &Step) -> Result<()> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .w()?;
        self.recording = Some(step.tokens().len());
        Ok(())
    }

    /// Ends the recording begun by [`Self::begin_record`] (whatever the pass
    /// returned) and launches the record: the step's logits. An error when
    /// the pass failed or could not be recorded (the size then runs plainly
    /// from now on); the tensors made while recording are then invalid.
    pub fn end_record(&mut self, ran: Result<Tensor>) -> Result<Tensor> {
        let tokens = self
            .recording
            .take()
            .ok_or_else(|| ModelError::InvalidBatch("a recording ended that never began".into()))?;
        let graph = self
            .stream
            .end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
        match (ran, graph) {
            (Ok(logits), Ok(Some(graph))) => {
                graph.launch().w()?;
                self.recorded.insert(
                    tokens,
                    Recorded {
                        logits: logits.clone(),
                        graph,
                    },
                );
                Ok(logits)
            }
            (ran, graph) => {
                self.refused.insert(tokens);
                Err(match (ran, graph) {
                    (Err(e), _) => e,
                    (_, Err(e)) => candle_core::Error::Cuda(Box::new(e)).into(),
                    _ => ModelError::InvalidBatch("an empty recording".into()),
                })
            }
        }
    }
}
