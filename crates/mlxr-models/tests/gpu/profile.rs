//! `gpu --profile MODEL.gguf [PROMPT [STEPS [SEQS]]]`: where a decode step's
//! time goes on the device. SEQS sequences (1 by default) are prefilled with
//! PROMPT tokens each (512 by default), then decoded together for STEPS (64)
//! steps with every op timed ([`Profiled`]); prints each op's time per step
//! and its share. A first run times the ops on the host alone
//! ([`Profiled::host_side`]): how long the host takes to enqueue a step
//! against the step's time.

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::backend::profiled::Profiled;
use mlxr_models::{Backend, CudaBackend, DecoderModel, ReferenceBackend, Session, StepGraphs};

use super::common::argmax;
use super::{geometry, prompt, BLOCK};

pub fn run(args: &[String], device: &Device) {
    let (model, prompt_len, steps, blocks) = load("--profile", args, (512, 64), device);
    let seqs: usize = args
        .get(3)
        .map(|s| s.parse().expect("SEQS: a number"))
        .unwrap_or(1)
        .max(1);
    let kv = geometry(&model, blocks * seqs);
    let shape = Shape {
        prompt_len,
        steps,
        seqs,
    };
    if device.is_cuda() {
        for graphs in [StepGraphs::Replay, StepGraphs::Off] {
            let mut b = CudaBackend::new(kv, DType::F16, device).unwrap();
            b.set_graphs(graphs);
            let per_step = timed(&model, Session::new(b, seqs, blocks, BLOCK), shape);
            println!(
                "decode {steps} steps of {seqs} sequences after {prompt_len}, graphs {graphs:?}: {per_step:.3} ms/step"
            );
        }
        let make = || CudaBackend::new(kv, DType::F16, device).unwrap();
        host_side(
            &model,
            Session::new(Profiled::host_side(make()), seqs, blocks, BLOCK),
            shape,
        );
        decode(
            &model,
            Session::new(Profiled::new(make()), seqs, blocks, BLOCK),
            shape,
        );
    } else {
        let make = || ReferenceBackend::new(kv, device).unwrap();
        host_side(
            &model,
            Session::new(Profiled::host_side(make()), seqs, blocks, BLOCK),
            shape,
        );
        decode(
            &model,
            Session::new(Profiled::new(make()), seqs, blocks, BLOCK),
            shape,
        );
    }
}

#[derive(Clone, Copy)]
struct Shape {
    prompt_len: usize,
    steps: usize,
    seqs: usize,
}

/// Each sequence prefilled alone: the next token of each.
fn prefill_all<B: Backend>(
    model: &DecoderModel,
    session: &mut Session<B>,
    shape: Shape,
) -> Vec<u32> {
    let vocab = model.config().vocab_size;
    (0..shape.seqs)
        .map(|s| {
            let tokens = prompt(shape.prompt_len, s, vocab);
            argmax(session.feed(model, &[(s, &tokens)]).unwrap())
        })
        .collect()
}

/// One decode step of every sequence: the next token of each.
fn step_all<B: Backend>(model: &DecoderModel, session: &mut Session<B>, next: &[u32]) -> Vec<u32> {
    let vocab = model.config().vocab_size;
    let chunks: Vec<(usize, &[u32])> = next
        .iter()
        .enumerate()
        .map(|(s, t)| (s, std::slice::from_ref(t)))
        .collect();
    let logits = session.feed(model, &chunks).unwrap();
    logits.chunks_exact(vocab).map(argmax).collect()
}

/// `MODEL.gguf [PROMPT [STEPS]]` (`defaults` for the numbers): the model on
/// `device`, the prompt length, the steps and the KV blocks they need.
fn load(
    mode: &str,
    args: &[String],
    defaults: (usize, usize),
    device: &Device,
) -> (DecoderModel, usize, usize, usize) {
    let usage = format!("gpu {mode} MODEL.gguf [PROMPT [STEPS]]");
    let path = Path::new(args.first().expect(&usage));
    let number = |i: usize, default: usize| {
        args.get(i)
            .map(|s| s.parse().expect(&usage))
            .unwrap_or(default)
    };
    let (prompt_len, steps) = (number(1, defaults.0), number(2, defaults.1));
    let file = GgufFile::open(path).unwrap();
    let model = DecoderModel::load_with_kernels(&file, device, None).unwrap();
    let blocks = (prompt_len + steps).div_ceil(BLOCK) + 1;
    (model, prompt_len, steps, blocks)
}

/// `gpu --ncu MODEL.gguf [PROMPT [STEPS]]`: one sequence prefilled with
/// PROMPT tokens (1,024), then STEPS (2) decode steps launched one kernel at
/// a time (no graphs) inside the CUDA profiler API's window, for
/// `ncu --profile-from-start off` to read the decode kernels alone.
pub fn ncu_window(args: &[String], device: &Device) {
    let (model, prompt_len, steps, blocks) = load("--ncu", args, (1024, 2), device);
    let mut b = CudaBackend::new(geometry(&model, blocks), DType::F16, device).unwrap();
    b.set_graphs(StepGraphs::Off);
    let mut session = Session::new(b, 1, blocks, BLOCK);
    let vocab = model.config().vocab_size;
    let logits = session.feed(&model, &[(0, &prompt(prompt_len, 0, vocab))]);
    let mut next = argmax(logits.unwrap());
    session.backend_mut().synchronize().unwrap();
    let window = candle_core::cuda_backend::cudarc::driver::Profiler::new().unwrap();
    for _ in 0..steps {
        next = argmax(session.feed(&model, &[(0, &[next])]).unwrap());
    }
    session.backend_mut().synchronize().unwrap();
    drop(window);
    println!("ncu window: {steps} decode steps after {prompt_len} tokens");
}

/// Decode steps as served: ms per step.
fn timed<B: Backend>(model: &DecoderModel, mut session: Session<B>, shape: Shape) -> f64 {
    let mut next = prefill_all(model, &mut session, shape);
    // Two steps to record the step's graph.
    for _ in 0..2 {
        next = step_all(model, &mut session, &next);
    }
    let start = Instant::now();
    for _ in 0..shape.steps {
        next = step_all(model, &mut session, &next);
    }
    start.elapsed().as_secs_f64() * 1e3 / shape.steps as f64
}

/// Decode steps timed without drains: the step's time against the host's
/// time to enqueue it (every op but `read`, which waits for the device).
fn host_side<B: Backend>(model: &DecoderModel, mut session: Session<Profiled<B>>, shape: Shape) {
    let Shape {
        prompt_len, steps, ..
    } = shape;
    let mut next = prefill_all(model, &mut session, shape);
    session.backend_mut().reset();
    let start = Instant::now();
    for _ in 0..steps {
        next = step_all(model, &mut session, &next);
    }
    let per_step = |d: std::time::Duration| d.as_secs_f64() * 1e3 / steps as f64;
    let rows = session.backend().report();
    let read: std::time::Duration = rows
        .iter()
        .filter(|r| r.op == "read")
        .map(|r| r.total)
        .sum();
    let enqueue: std::time::Duration = rows
        .iter()
        .filter(|r| r.op != "read")
        .map(|r| r.total)
        .sum();
    println!(
        "decode {steps} steps after {prompt_len}, not drained: {:.3} ms/step; host enqueues in {:.3} ms, waits in read {:.3} ms",
        per_step(start.elapsed()),
        per_step(enqueue),
        per_step(read)
    );
}

fn decode<B: Backend>(model: &DecoderModel, mut session: Session<Profiled<B>>, shape: Shape) {
    let Shape {
        prompt_len,
        steps,
        seqs,
    } = shape;
    let mut next = prefill_all(model, &mut session, shape);
    println!("prefill {prompt_len} tokens (a sequence's, of {seqs}):");
    table(session.backend(), seqs);
    session.backend_mut().reset();
    let start = Instant::now();
    for _ in 0..steps {
        next = step_all(model, &mut session, &next);
    }
    let wall = start.elapsed();
    println!(
        "decode {steps} steps after {prompt_len}: {:.3} ms/step profiled",
        wall.as_secs_f64() * 1e3 / steps as f64
    );
    table(session.backend(), steps);
}

fn table<B: Backend>(p: &Profiled<B>, steps: usize) {
    let rows = p.report();
    let total: f64 = rows.iter().map(|r| r.total.as_secs_f64()).sum();
    println!("{:>10} {:>8} {:>6}  op", "ms/step", "calls", "share");
    for r in rows {
        let t = r.total.as_secs_f64();
        println!(
            "{:>10.4} {:>8} {:>5.1}%  {}",
            t * 1e3 / steps as f64,
            r.calls / steps,
            100.0 * t / total,
            r.op
        );
    }
}
