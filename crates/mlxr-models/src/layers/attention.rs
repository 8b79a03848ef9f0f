use candle_core::{Device, Tensor};

use crate::batch::SeqChunk;
use crate::config::{LayerAttention, ModelConfig};
use crate::layers::rope::RopeTables;
use crate::layers::{QLinear, RmsNorm, Rope};
use crate::weights::GgufWeights;
use crate::Result;

/// Multi-head attention with grouped KV heads, optional QK-norm and an
/// optional sliding window, over a batch of sequence chunks.
pub struct Attention {
    layer: usize,
    wq: QLinear,
    wk: QLinear,
    wv: QLinear,
    wo: QLinear,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f64,
    span: LayerAttention,
}

impl Attention {
    pub fn load(w: &GgufWeights, layer: usize, cfg: &ModelConfig) -> Result<Self> {
        let p = format!("blk.{layer}");
        let (h, d) = (cfg.hidden_size, cfg.head_dim);
        let qk_norm = |name: &str| -> Result<Option<RmsNorm>> {
            cfg.qk_norm
                .then(|| RmsNorm::load(w, &format!("{p}.{name}.weight"), d, cfg.rms_norm_eps))
                .transpose()
        };
        Ok(Self {
            layer,
            wq: QLinear::load(w, &format!("{p}.attn_q.weight"), cfg.n_heads * d, h)?,
            wk: QLinear::load(w, &format!("{p}.attn_k.weight"), cfg.n_kv_heads * d, h)?,
            wv: QLinear::load(w, &format!("{p}.attn_v.weight"), cfg.n_kv_heads * d, h)?,
            wo: QLinear::load(w, &format!("{p}.attn_output.weight"), h, cfg.n_heads * d)?,
            q_norm: qk_norm("attn_q_norm")?,
            k_norm: qk_norm("attn_k_norm")?,
            n_heads: cfg.n_heads,
            n_kv_heads: cfg.n_kv_heads,
            head_dim: d,
            scale: cfg.attention_scale as f64,
            span: cfg.layers[layer],
        })
    }

    /// `x`: `[tokens, hidden]`, the tokens of `seqs` in order.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &Rope,
        tables: &RopeTables,
        seqs: &mut [SeqChunk<'_>],
    ) -> Result<Tensor> {
        let tokens = x.dim(0)?;
        let mut q = self
            .wq
            .forward(x)?
            .reshape((tokens, self.n_heads, self.head_dim))?;
        let mut k = self
            .wk
            .forward(x)?
            .reshape((tokens, self.n_kv_heads, self.head_dim))?;
        let v = self
            .wv
            .forward(x)?
            .reshape((tokens, self.n_kv_heads, self.head_dim))?;
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let q = rope.apply(&q, tables)?;
        let k = rope.apply(&k, tables)?;

        let mut outputs = Vec::with_capacity(seqs.len());
        let mut offset = 0;
        for seq in seqs.iter_mut() {
            let q = q.narrow(0, offset, seq.len)?;
            let k = k.narrow(0, offset, seq.len)?.transpose(0, 1)?;
            let v = v.narrow(0, offset, seq.len)?.transpose(0, 1)?;
            let (k_all, v_all) = seq.cache.append(self.layer, seq.start_pos, &k, &v)?;
            outputs.push(self.attend(&q, &k_all, &v_all, seq.start_pos)?);
            offset += seq.len;
        }
        let out = Tensor::cat(&outputs, 0)?;
        self.wo.forward(&out)
    }

    /// Dense attention of one chunk. `q`: `[len, n_heads, d]`, `k_all`/`v_all`:
    /// `[n_kv_heads, start_pos + len, d]`; returns `[len, n_heads * d]`.
    fn attend(
        &self,
        q: &Tensor,
        k_all: &Tensor,
        v_all: &Tensor,
        start_pos: usize,
    ) -> Result<Tensor> {
        let len = q.dim(0)?;
        let kv_len = k_all.dim(1)?;
        let group = self.n_heads / self.n_kv_heads;
        let d = self.head_dim;
        // Query head h reads KV head h / group: fold the group into the row axis.
        let q = q
            .reshape((len, self.n_kv_heads, group, d))?
            .permute((1, 2, 0, 3))?
            .reshape((self.n_kv_heads, group * len, d))?
            .contiguous()?;
        let k_t = k_all.contiguous()?.transpose(1, 2)?;
        let scores = (q.matmul(&k_t)? * self.scale)?;
        let scores = scores.reshape((self.n_kv_heads, group, len, kv_len))?;
        let scores = match self.mask(len, start_pos, q.device())? {
            Some(mask) => scores.broadcast_add(&mask)?,
            None => scores,
        };
        let probs = candle_nn::ops::softmax_last_dim(&scores.contiguous()?)?;
        let probs = probs.reshape((self.n_kv_heads, group * len, kv_len))?;
        let out = probs.matmul(&v_all.contiguous()?)?;
        Ok(out
            .reshape((self.n_kv_heads, group, len, d))?
            .permute((2, 0, 1, 3))?
            .reshape((len, self.n_heads * d))?)
    }

    /// Additive mask `[len, start_pos + len]`: causal, and within the sliding
    /// window when the layer has one. `None` when nothing is masked.
    fn mask(&self, len: usize, start_pos: usize, device: &Device) -> Result<Option<Tensor>> {
        let kv_len = start_pos + len;
        let window = self.span.sliding_window.unwrap_or(usize::MAX);
        if len == 1 && kv_len <= window {
            return Ok(None);
        }
        let mut mask = vec![0f32; len * kv_len];
        for i in 0..len {
            let pos = start_pos + i;
            for (j, m) in mask[i * kv_len..(i + 1) * kv_len].iter_mut().enumerate() {
                if j > pos || pos - j >= window {
                    *m = f32::NEG_INFINITY;
                }
            }
        }
        Ok(Some(Tensor::from_vec(mask, (len, kv_len), device)?))
    }
}
