//! Where a step's time goes: any backend with each op timed, the device
//! drained before and after it ([`Backend::synchronize`]), so an op's time is
//! its launches plus the device's work. The sum exceeds an unprofiled step
//! by the drains; the shares show which ops to speed up.
//!
//! [`Profiled::host_side`] times the same calls without the drains: each op's
//! time is then what it costs the host to enqueue, and `read` waits for the
//! device. When the ops' sum is near the step's time and `read` is short, the
//! step is bound by launches on the host, not by the device's work.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{AttentionSpec, Backend, Glu};
use crate::layers::{Embedding, Linear, RmsNorm, Rope};
use crate::step::Step;
use crate::Result;

pub struct Profiled<B> {
    inner: B,
    drain: bool,
    times: BTreeMap<String, (usize, Duration)>,
}

/// One row of [`Profiled::report`].
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    pub op: String,
    pub calls: usize,
    pub total: Duration,
}

impl<B: Backend> Profiled<B> {
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            drain: true,
            times: BTreeMap::new(),
        }
    }

    /// Each op timed on the host alone, the device not drained.
    pub fn host_side(inner: B) -> Self {
        Self {
            drain: false,
            ..Self::new(inner)
        }
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Forgets the times so far (after a warm-up).
    pub fn reset(&mut self) {
        self.times.clear();
    }

    /// Every op's calls and time, the slowest first.
    pub fn report(&self) -> Vec<OpTime> {
        let mut rows: Vec<OpTime> = self
            .times
            .iter()
            .map(|(op, &(calls, total))| OpTime {
                op: op.clone(),
                calls,
                total,
            })
            .collect();
        rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.op.cmp(&b.op)));
        rows
    }

    fn timed<R>(
        &mut self,
        op: impl FnOnce() -> String,
        f: impl FnOnce(&mut B) -> Result<R>,
    ) -> Result<R> {
        if self.drain {
            self.inner.synchronize()?;
        }
        let start = Instant::now();
        let r = f(&mut self.inner)?;
        if self.drain {
            self.inner.synchronize()?;
        }
        let entry = self.times.entry(op()).or_default();
        entry.0 += 1;
        entry.1 += start.elapsed();
        Ok(r)
    }
}

/// A weight's label: its type and shape (`Q4_K 4096x14336`).
fn weight(w: &Linear) -> String {
    let (out, inp) = w.shape();
    let dtype = match w.ggml_tensor() {
        Some(t) => format!("{:?}", t.dtype()),
        None => "float".into(),
    };
    format!("{dtype} {out}x{inp}")
}

fn rows_label(rows: usize) -> &'static str {
    match rows {
        1 => "1 row",
        2..=8 => "2-8 rows",
        _ => ">8 rows",
    }
}

impl<B: Backend> Backend for Profiled<B> {
    type Act = B::Act;

    fn num_blocks(&self) -> usize {
        self.inner.num_blocks()
    }

    fn synchronize(&mut self) -> Result<()> {
        self.inner.synchronize()
    }

    fn begin_step(&mut self, step: &Step, ropes: &[Rope]) -> Result<()> {
        self.timed(|| "begin_step".into(), |b| b.begin_step(step, ropes))
    }

    fn embed(&mut self, table: &Embedding, tokens: &[u32], out: &mut Self::Act) -> Result<()> {
        self.timed(|| "embed".into(), |b| b.embed(table, tokens, out))
    }

    fn scale(&mut self, x: &mut Self::Act, factor: f32) -> Result<()> {
        self.timed(|| "scale".into(), |b| b.scale(x, factor))
    }

    fn rms_norm(&mut self, x: &Self::Act, norm: &RmsNorm, out: &mut Self::Act) -> Result<()> {
        let op = || format!("rms_norm {}", norm.dim());
        self.timed(op, |b| b.rms_norm(x, norm, out))
    }

    fn matmul(&mut self, x: &Self::Act, w: &Linear, out: &mut Self::Act) -> Result<()> {
        self.timed(|| format!("matmul {}", weight(w)), |b| b.matmul(x, w, out))
    }

    fn matmuls(&mut self, x: &Self::Act, ws: &[Linear], outs: &mut [&mut Self::Act]) -> Result<()> {
        let op = || {
            let names: Vec<String> = ws.iter().map(weight).collect();
            format!("matmuls {}", names.join(" + "))
        };
        self.timed(op, |b| b.matmuls(x, ws, outs))
    }

    fn split(
        &mut self,
        x: &Self::Act,
        widths: &[usize],
        outs: &mut [&mut Self::Act],
    ) -> Result<()> {
        self.timed(|| "split".into(), |b| b.split(x, widths, outs))
    }

    fn rope(
        &mut self,
        q: &mut Self::Act,
        k: &mut Self::Act,
        rope: &Rope,
        index: usize,
        head_dim: usize,
    ) -> Result<()> {
        self.timed(|| "rope".into(), |b| b.rope(q, k, rope, index, head_dim))
    }

    fn glu(
        &mut self,
        gate: &Self::Act,
        up: &Self::Act,
        glu: Glu,
        out: &mut Self::Act,
    ) -> Result<()> {
        self.timed(|| "glu".into(), |b| b.glu(gate, up, glu, out))
    }

    fn add(&mut self, x: &mut Self::Act, y: &Self::Act) -> Result<()> {
        self.timed(|| "add".into(), |b| b.add(x, y))
    }

    fn add_rms_norm(
        &mut self,
        x: &mut Self::Act,
        y: &Self::Act,
        norm: &RmsNorm,
        out: &mut Self::Act,
    ) -> Result<()> {
        let op = || format!("add_rms_norm {}", norm.dim());
        self.timed(op, |b| b.add_rms_norm(x, y, norm, out))
    }

    fn softcap(&mut self, x: &mut Self::Act, cap: f32) -> Result<()> {
        self.timed(|| "softcap".into(), |b| b.softcap(x, cap))
    }

    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        step: &Step,
        q: &Self::Act,
        k: &Self::Act,
        v: &Self::Act,
        out: &mut Self::Act,
    ) -> Result<()> {
        let op = || format!("attend {}", rows_label(step.positions().len()));
        self.timed(op, |b| b.attend(layer, spec, step, q, k, v, out))
    }

    fn all_reduce(&mut self, x: &mut Self::Act) -> Result<()> {
        self.timed(|| "all_reduce".into(), |b| b.all_reduce(x))
    }

    fn all_gather_cols(&mut self, x: &mut Self::Act, rows: usize) -> Result<()> {
        self.timed(|| "all_gather_cols".into(), |b| b.all_gather_cols(x, rows))
    }

    fn select_rows(&mut self, x: &mut Self::Act, rows: &[usize], width: usize) -> Result<()> {
        self.timed(|| "select_rows".into(), |b| b.select_rows(x, rows, width))
    }

    fn read<'a>(&'a mut self, x: &'a Self::Act) -> Result<&'a [f32]> {
        if self.drain {
            self.inner.synchronize()?;
        }
        let start = Instant::now();
        let host = self.inner.read(x)?;
        let entry = self.times.entry("read".into()).or_default();
        entry.0 += 1;
        entry.1 += start.elapsed();
        Ok(host)
    }
}
