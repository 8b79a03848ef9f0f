use candle_core::Tensor;

use crate::batch::SeqChunk;
use crate::config::ModelConfig;
use crate::kv_cache::{AttentionSpec, KvCache};
use crate::layers::rope::RopeTables;
use crate::layers::{Linear, Projections, RmsNorm, Rope};
use crate::paged::PagedKvView;
use crate::weights::Weights;
use crate::workspace::{sized, Workspace};
use crate::Result;

/// Multi-head attention with grouped KV heads, optional QK-norm and an
/// optional sliding window, over a batch of sequence chunks.
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
        let (n_heads, n_kv, d) = (self.spec.n_heads, self.spec.n_kv_heads, self.spec.head_dim);
        let [q, k, v]: [Tensor; 3] = self.qkv.forward(x)?.try_into().expect("three projections");
        let mut q = q.contiguous()?.reshape((tokens, n_heads, d))?;
        let mut k = k.contiguous()?.reshape((tokens, n_kv, d))?;
        let v = v.contiguous()?.reshape((tokens, n_kv, d))?;
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let q = rope.apply(&q, tables)?;
        let k = rope.apply(&k, tables)?;
        let out = kv.attend(self.layer, &self.spec, seqs, &q, &k, &v)?;
        self.wo.forward(&out)
    }

    /// Whether every projection has a kernel for [`Self::forward_into`].
    pub fn has_kernels(&self) -> bool {
        self.qkv.has_kernels() && self.wo.has_kernel()
    }

    /// [`Self::forward`] over `ws`, bit for bit: `ws.normed` `[tokens,
    /// hidden]` in, the output projection into `ws.branch`.
    pub fn forward_into(
        &self,
        ws: &mut Workspace,
        tokens: usize,
        rope: &Rope,
        tables: (&[f32], &[f32]),
        seqs: &[SeqChunk],
        kv: &mut PagedKvView,
    ) -> Result<()> {
        let Workspace {
            normed,
            q,
            k,
            v,
            head_norm,
            attn,
            branch,
            stacked,
            matmul,
            attention,
            ..
        } = ws;
        let (n_heads, n_kv, d) = (self.spec.n_heads, self.spec.n_kv_heads, self.spec.head_dim);
        let q = sized(q, tokens * n_heads * d);
        let k = sized(k, tokens * n_kv * d);
        let v = sized(v, tokens * n_kv * d);
        self.qkv.forward_into(
            normed,
            tokens,
            &mut [&mut *q, &mut *k, &mut *v],
            stacked,
            matmul,
        )?;
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            for (x, norm) in [(&mut *q, qn), (&mut *k, kn)] {
                let out = sized(head_norm, x.len());
                norm.forward_into(x, out);
                x.copy_from_slice(out);
            }
        }
        rope.apply_in_place(q, tokens, d, tables);
        rope.apply_in_place(k, tokens, d, tables);
        let attn = sized(attn, tokens * n_heads * d);
        kv.attend_into(self.layer, &self.spec, seqs, [q, k, v], attn, attention)?;
        let hidden = self.wo.rows();
        self.wo
            .forward_into(attn, sized(branch, tokens * hidden), matmul)
    }
}
