use candle_core::Tensor;

use crate::batch::SeqChunk;
use crate::config::ModelConfig;
use crate::kv_cache::{AttentionSpec, KvCache};
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
    spec: AttentionSpec,
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
            spec: AttentionSpec {
                n_heads: cfg.n_heads,
                n_kv_heads: cfg.n_kv_heads,
                head_dim: d,
                scale: cfg.attention_scale,
                sliding_window: cfg.layers[layer].sliding_window,
            },
        })
    }

    /// `x`: `[tokens, hidden]`, the tokens of `seqs` in order.
    pub fn forward(
        &self,
        x: &Tensor,
        rope: &Rope,
        tables: &RopeTables,
        seqs: &[SeqChunk],
        kv: &mut dyn KvCache,
    ) -> Result<Tensor> {
        let tokens = x.dim(0)?;
        let mut q = self
            .wq
            .forward(x)?
            .reshape((tokens, self.spec.n_heads, self.spec.head_dim))?;
        let mut k =
            self.wk
                .forward(x)?
                .reshape((tokens, self.spec.n_kv_heads, self.spec.head_dim))?;
        let v = self
            .wv
            .forward(x)?
            .reshape((tokens, self.spec.n_kv_heads, self.spec.head_dim))?;
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let q = rope.apply(&q, tables)?;
        let k = rope.apply(&k, tables)?;
        let out = kv.attend(self.layer, &self.spec, seqs, &q, &k, &v)?;
        self.wo.forward(&out)
    }
}
