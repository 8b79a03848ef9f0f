use crate::backend::{AttentionSpec, Backend};
use crate::config::ModelConfig;
use crate::layers::{Linear, Projections, RmsNorm, Rope};
use crate::pass::Activations;
use crate::step::Step;
use crate::weights::Weights;
use crate::Result;

/// Multi-head attention with grouped KV heads, optional QK-norm, an
/// optional sliding window and optional soft-capped scores, over a batch of
/// sequence chunks.
pub struct Attention {
    layer: usize,
    /// Q, then K, then V.
    qkv: Projections,
    wo: Linear,
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    spec: AttentionSpec,
}

impl Attention {
    pub fn load(w: &dyn Weights, layer: usize, cfg: &ModelConfig) -> Result<Self> {
        let p = format!("blk.{layer}");
        let (h, d) = (cfg.hidden_size, cfg.head_dim);
        let (q_dim, kv_dim) = (cfg.n_heads * d, cfg.n_kv_heads * d);
        let qk_norm = |name: &str| -> Result<Option<RmsNorm>> {
            cfg.qk_norm
                .then(|| {
                    let name = format!("{p}.{name}.weight");
                    RmsNorm::load(w, &name, d, cfg.rms_norm_eps, cfg.norm_offset)
                })
                .transpose()
        };
        let qkv = if w.contains(&format!("{p}.attn_qkv.weight")) {
            // One matrix with the Q rows, then K, then V (Phi-3).
            let all = Linear::load(w, &format!("{p}.attn_qkv"), q_dim + 2 * kv_dim, h)?;
            Projections::stored_stacked(all, vec![q_dim, kv_dim, kv_dim])
        } else {
            let layer = |name: &str, out: usize| (format!("{p}.{name}"), out);
            let layers = [
                layer("attn_q", q_dim),
                layer("attn_k", kv_dim),
                layer("attn_v", kv_dim),
            ];
            Projections::load(w, &layers, h)?
        };
        Ok(Self {
            layer,
            qkv,
            wo: Linear::load(w, &format!("{p}.attn_output"), h, q_dim)?,
            q_norm: qk_norm("attn_q_norm")?,
            k_norm: qk_norm("attn_k_norm")?,
            spec: AttentionSpec {
                n_heads: cfg.n_heads,
                n_kv_heads: cfg.n_kv_heads,
                head_dim: d,
                scale: cfg.attention_scale,
                sliding_window: cfg.layers[layer].sliding_window,
                softcap: cfg.attn_logit_softcap,
            },
        })
    }

    /// `a.normed` `[tokens, hidden]` in, the output projection into
    /// `a.branch`; `rope` is the step's RoPE `rope_index`.
    pub fn forward<B: Backend>(
        &self,
        b: &mut B,
        a: &mut Activations<B>,
        rope: &Rope,
        rope_index: usize,
        step: &Step,
    ) -> Result<()> {
        let Activations {
            normed,
            q,
            k,
            v,
            head_norm,
            attn,
            branch,
            stacked,
            ..
        } = a;
        self.qkv
            .forward(b, normed, &mut [&mut *q, &mut *k, &mut *v], stacked)?;
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            for (x, norm) in [(&mut *q, qn), (&mut *k, kn)] {
                b.rms_norm(x, norm, head_norm)?;
                std::mem::swap(x, head_norm);
            }
        }
        let d = self.spec.head_dim;
        b.rope(q, k, rope, rope_index, d)?;
        b.attend(self.layer, &self.spec, step, q, k, v, attn)?;
        b.matmul(attn, &self.wo, branch)
    }
}
