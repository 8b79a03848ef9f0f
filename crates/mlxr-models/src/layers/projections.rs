use std::ops::Range;

use crate::backend::Backend;
use crate::layers::Linear;
use crate::weights::Weights;
use crate::Result;

/// Several projections of one input (Q, K and V; gate and up), computed by
/// as few matmuls as the weights allow: neighbours the source can stack
/// (the same quantized type on the CPU) run as one matrix, so the
/// activations are quantized once and the thread pool wakes once for them;
/// the others go to the backend together ([`Backend::matmuls`]), which may
/// run them in one launch. Neither changes a result: every output row is
/// computed on its own.
pub struct Projections {
    /// The matmuls, in order.
    linears: Vec<Linear>,
    /// The widths of the outputs each matmul produces (several: stacked).
    widths: Vec<Vec<usize>>,
    /// Matmuls given to the backend at once: a stacked one, or a run of
    /// unstacked ones.
    runs: Vec<Range<usize>>,
}

impl Projections {
    /// `{prefix}.weight` (`[out, inp]`, and `{prefix}.bias` where the file
    /// has it) for each `(prefix, out)`.
    pub fn load(w: &dyn Weights, layers: &[(String, usize)], inp: usize) -> Result<Self> {
        let mut parts = Vec::new();
        let mut first = 0;
        while first < layers.len() {
            let mut stacked = None;
            for end in (first + 2..=layers.len()).rev() {
                if let Some(linear) = Linear::load_stacked(w, &layers[first..end], inp)? {
                    stacked = Some((linear, end));
                    break;
                }
            }
            let (linear, end) = match stacked {
                Some(found) => found,
                None => {
                    let (prefix, out) = &layers[first];
                    (Linear::load(w, prefix, *out, inp)?, first + 1)
                }
            };
            let widths = layers[first..end].iter().map(|(_, out)| *out).collect();
            parts.push((linear, widths));
            first = end;
        }
        Ok(Self::new(parts))
    }

    /// One matrix that the file already stores stacked (Phi-3's QKV and
    /// gate/up), producing outputs of `widths`.
    pub fn stored_stacked(linear: Linear, widths: Vec<usize>) -> Self {
        Self::new(vec![(linear, widths)])
    }

    fn new(parts: Vec<(Linear, Vec<usize>)>) -> Self {
        let mut runs: Vec<Range<usize>> = Vec::new();
        for (i, (_, widths)) in parts.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if widths.len() == 1 && parts[run.start].1.len() == 1 => run.end = i + 1,
                _ => runs.push(i..i + 1),
            }
        }
        let (linears, widths) = parts.into_iter().unzip();
        Self {
            linears,
            widths,
            runs,
        }
    }

    /// Whether the first matmul's weights are GGML-quantized (see
    /// [`Linear::is_ggml_quantized`]).
    pub fn is_ggml_quantized(&self) -> bool {
        self.linears[0].is_ggml_quantized()
    }

    /// `x` `[m, inp]`, projection `j` into `outs[j]` (`[m, out_j]`); a
    /// stacked matmul's rows pass through `stacked` on their way.
    pub fn forward<B: Backend>(
        &self,
        b: &mut B,
        x: &B::Act,
        outs: &mut [&mut B::Act],
        stacked: &mut B::Act,
    ) -> Result<()> {
        let mut next = 0;
        for run in &self.runs {
            let widths = &self.widths[run.start];
            if widths.len() > 1 {
                b.matmul(x, &self.linears[run.start], stacked)?;
                b.split(stacked, widths, &mut outs[next..next + widths.len()])?;
                next += widths.len();
                continue;
            }
            let linears = &self.linears[run.clone()];
            b.matmuls(x, linears, &mut outs[next..next + linears.len()])?;
            next += linears.len();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{DType, Device, Tensor};
    use mlxr_formats::gguf::writer::GgufWriter;
    use mlxr_formats::gguf::{GgmlType, GgufFile};
    use rand::{Rng, SeedableRng};

    use super::Projections;
    use crate::backend::cpu::CpuBackend;
    use crate::backend::{Backend, KvGeometry};
    use crate::layers::Linear;
    use crate::weights::GgufWeights;

    const INP: usize = 64;

    /// A GGUF file with `(name, rows, type, bias)` matrices of `INP` columns.
    fn file(layers: &[(&str, usize, GgmlType, bool)]) -> GgufFile {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut w = GgufWriter::new();
        for &(name, rows, ty, bias) in layers {
            let values: Vec<f32> = (0..rows * INP)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let t = Tensor::from_vec(values, (rows, INP), &Device::Cpu).unwrap();
            let dtype = match ty {
                GgmlType::Q8_0 => GgmlDType::Q8_0,
                GgmlType::Q5_0 => GgmlDType::Q5_0,
                _ => unreachable!(),
            };
            let q = QTensor::quantize(&t, dtype).unwrap();
            let data = q.data().unwrap().into_owned();
            w = w.tensor(
                format!("{name}.weight"),
                &[INP as u64, rows as u64],
                ty,
                data,
            );
            if bias {
                let b: Vec<f32> = (0..rows).map(|_| rng.random_range(-1.0..1.0)).collect();
                w = w.tensor_f32(format!("{name}.bias"), &[rows as u64], &b);
            }
        }
        GgufFile::from_bytes(w.build()).unwrap()
    }

    /// Loads the layers as [`Projections`] and checks each output, on the
    /// CPU backend, equals the layer loaded alone, bit for bit; returns how
    /// many matmuls ran.
    fn check(layers: &[(&str, usize, GgmlType, bool)]) -> usize {
        let file = file(layers);
        let weights = GgufWeights::new(&file, &Device::Cpu);
        let named: Vec<(String, usize)> = layers.iter().map(|l| (l.0.to_string(), l.1)).collect();
        let projections = Projections::load(&weights, &named, INP).unwrap();
        let kv = KvGeometry {
            n_layers: 1,
            num_blocks: 1,
            block_size: 1,
            n_kv_heads: 1,
            head_dim: 1,
        };
        let mut b = CpuBackend::new(kv, DType::F32).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        for tokens in [1, 5, 20] {
            let x: Vec<f32> = (0..tokens * INP)
                .map(|_| rng.random_range(-2.0..2.0))
                .collect();
            let mut outs: Vec<Vec<f32>> = vec![Vec::new(); layers.len()];
            let mut slices: Vec<&mut Vec<f32>> = outs.iter_mut().collect();
            let mut stacked = Vec::new();
            projections
                .forward(&mut b, &x, &mut slices, &mut stacked)
                .unwrap();
            for ((name, rows), out) in named.iter().zip(&outs) {
                let alone = Linear::load(&weights, name, *rows, INP).unwrap();
                let mut want = Vec::new();
                b.matmul(&x, &alone, &mut want).unwrap();
                assert_eq!(out, &want, "{name}, {tokens} tokens");
            }
        }
        projections.linears.len()
    }

    #[test]
    fn stacked_projections_equal_separate_ones() {
        use GgmlType::{Q5_0, Q8_0};
        // Q and K share a type (stacked, biases too); V has another.
        let qkv = [
            ("q", 64, Q8_0, true),
            ("k", 32, Q8_0, true),
            ("v", 32, Q5_0, true),
        ];
        assert_eq!(check(&qkv), 2);
        // All three alike: one matmul.
        assert_eq!(
            check(&[
                ("q", 48, Q5_0, false),
                ("k", 16, Q5_0, false),
                ("v", 16, Q5_0, false)
            ]),
            1
        );
        // A bias on only some of them: not stacked.
        assert_eq!(
            check(&[("gate", 32, Q8_0, true), ("up", 32, Q8_0, false)]),
            2
        );
    }
}
