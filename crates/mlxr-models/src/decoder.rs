//! The decoder-only transformer shared by every supported architecture.

use std::path::Path;

use candle_core::{Device, Tensor};
use mlxr_formats::gguf::GgufFile;

use crate::batch::SeqChunk;
use crate::config::ModelConfig;
use crate::kernels::{RowOrder, SpinPool};
use crate::kv_cache::KvCache;
use crate::layers::{Attention, Embedding, Linear, Mlp, RmsNorm, Rope};
use crate::paged::PagedKvView;
use crate::weights::{GgufWeights, SafetensorsWeights, Weights};
use crate::workspace::{sized, Workspace};
use crate::{ModelError, Result};

struct DecoderLayer {
    attn_norm: RmsNorm,
    attention: Attention,
    post_attn_norm: Option<RmsNorm>,
    ffn_norm: RmsNorm,
    mlp: Mlp,
    post_ffn_norm: Option<RmsNorm>,
    /// Index into `DecoderModel::ropes`.
    rope: usize,
}

pub struct DecoderModel {
    config: ModelConfig,
    device: Device,
    token_embd: Embedding,
    layers: Vec<DecoderLayer>,
    ropes: Vec<Rope>,
    output_norm: RmsNorm,
    lm_head: Linear,
    /// Whether [`Self::forward_into`] can run (every weight has a kernel).
    buffered: bool,
}

impl DecoderModel {
    /// Loads with ggml's matmul order: bit-identical to llama.cpp.
    pub fn load(file: &GgufFile, device: &Device) -> Result<Self> {
        Self::load_with_order(file, device, RowOrder::Ggml)
    }

    /// Loads with the given matmul order ([`RowOrder::Independent`] for a
    /// batching engine).
    pub fn load_with_order(file: &GgufFile, device: &Device, order: RowOrder) -> Result<Self> {
        let config = ModelConfig::from_gguf(file.metadata())?;
        let weights = GgufWeights::new(file, device).with_row_order(order);
        Self::from_weights(config, &weights, device)
    }

    /// Loads a Hugging Face or MLX model folder (`config.json` and
    /// safetensors weights).
    pub fn load_dir(dir: &Path, device: &Device) -> Result<Self> {
        let config = ModelConfig::from_hf_dir(dir)?;
        let weights = SafetensorsWeights::open(dir, config.post_norms, device)?;
        Self::from_weights(config, &weights, device)
    }

    pub fn from_weights(config: ModelConfig, w: &dyn Weights, device: &Device) -> Result<Self> {
        let (h, eps, offset) = (config.hidden_size, config.rms_norm_eps, config.norm_offset);
        let norm = |name: &str| RmsNorm::load(w, name, h, eps, offset);

        let token_embd = w.embedding("token_embd.weight", config.vocab_size, h)?;
        // Files without `output.weight` tie the LM head to the embeddings.
        let (token_embd, lm_head) = if w.contains("output.weight") {
            (token_embd, Linear::load(w, "output", config.vocab_size, h)?)
        } else {
            token_embd.tie(w.row_order())?
        };

        let mut ropes: Vec<Rope> = Vec::new();
        let mut layers = Vec::with_capacity(config.n_layers);
        for i in 0..config.n_layers {
            let p = format!("blk.{i}");
            let base = config.layers[i].rope_base;
            let rope = match ropes.iter().position(|r| r.base() == base) {
                Some(r) => r,
                None => {
                    ropes.push(Rope::new(config.rope_style, config.rope_dim, base));
                    ropes.len() - 1
                }
            };
            let post = |name: &str| -> Result<Option<RmsNorm>> {
                config
                    .post_norms
                    .then(|| norm(&format!("{p}.{name}.weight")))
                    .transpose()
            };
            layers.push(DecoderLayer {
                attn_norm: norm(&format!("{p}.attn_norm.weight"))?,
                attention: Attention::load(w, i, &config)?,
                post_attn_norm: post("post_attention_norm")?,
                ffn_norm: norm(&format!("{p}.ffn_norm.weight"))?,
                mlp: Mlp::load(w, &p, &config)?,
                post_ffn_norm: post("post_ffw_norm")?,
                rope,
            });
        }
        let buffered = device.is_cpu()
            && token_embd.has_rows()
            && lm_head.has_kernel()
            && layers
                .iter()
                .all(|l| l.attention.has_kernels() && l.mlp.has_kernels());
        Ok(Self {
            output_norm: norm("output_norm.weight")?,
            config,
            device: device.clone(),
            token_embd,
            layers,
            ropes,
            lm_head,
            buffered,
        })
    }

    /// Whether [`Self::forward_into`] runs this model: on the CPU, with a
    /// kernel for every weight (GGUF types listed in [`crate::kernels`],
    /// regrouped into tiles where the CPU has AVX-512 VNNI).
    pub fn supports_buffered(&self) -> bool {
        self.buffered
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Runs `tokens` (the chunks of `seqs`, concatenated in order) through the
    /// model, stores their keys and values in `kv` and returns
    /// the logits of each chunk's last token, `[seqs.len(), vocab_size]`.
    pub fn forward(
        &self,
        tokens: &[u32],
        seqs: &[SeqChunk],
        kv: &mut dyn KvCache,
    ) -> Result<Tensor> {
        self.check_batch(tokens, seqs)?;
        let positions: Vec<usize> = seqs.iter().flat_map(|s| s.positions()).collect();
        let tables = self
            .ropes
            .iter()
            .map(|r| r.tables(&positions, &self.device))
            .collect::<Result<Vec<_>>>()?;

        let mut x = self.token_embd.forward(tokens, &self.device)?;
        if let Some(scale) = self.config.embedding_scale {
            x = (x * scale as f64)?;
        }
        // Only each chunk's last token needs logits. Its rows are picked
        // after the last layer's attention (which needs every row's keys and
        // values), so that layer's MLP runs on them alone, as in llama.cpp.
        let mut last = Vec::with_capacity(seqs.len());
        let mut end = 0u32;
        for seq in seqs.iter() {
            end += seq.len as u32;
            last.push(end - 1);
        }
        let last = Tensor::new(last.as_slice(), &self.device)?;
        let n_layers = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            let rope = &self.ropes[layer.rope];
            let h = layer.attn_norm.forward(&x)?;
            let mut h = layer
                .attention
                .forward(&h, rope, &tables[layer.rope], seqs, kv)?;
            if let Some(norm) = &layer.post_attn_norm {
                h = norm.forward(&h)?;
            }
            x = (x + h)?;
            if i + 1 == n_layers {
                x = x.index_select(&last, 0)?;
            }
            let h = layer.ffn_norm.forward(&x)?;
            let mut h = layer.mlp.forward(&h)?;
            if let Some(norm) = &layer.post_ffn_norm {
                h = norm.forward(&h)?;
            }
            x = (x + h)?;
        }
        let x = self.output_norm.forward(&x)?;
        self.lm_head.forward(&x)
    }

    /// [`Self::forward`] over the buffers of `ws` with the paged cache, the
    /// same logits bit for bit (`[seqs.len(), vocab_size]`, row-major, in
    /// `ws`). Once `ws` has seen a batch this large, nothing is allocated.
    /// Only for models that [`Self::supports_buffered`].
    pub fn forward_into<'w>(
        &self,
        tokens: &[u32],
        seqs: &[SeqChunk],
        kv: &mut PagedKvView,
        ws: &'w mut Workspace,
    ) -> Result<&'w [f32]> {
        if !self.buffered {
            return Err(ModelError::InvalidBatch(
                "this model has weights without a CPU kernel; use the tensor forward pass".into(),
            ));
        }
        self.check_batch(tokens, seqs)?;
        let pool = match ws.pool.take() {
            Some(pool) => pool,
            None => SpinPool::new(rayon::current_num_threads()).map_err(|e| {
                ModelError::InvalidConfig(format!("starting the kernel threads: {e}"))
            })?,
        };
        let passed = pool.install(|| self.buffered_pass(tokens, seqs, kv, ws));
        ws.pool = Some(pool);
        passed?;
        Ok(&ws.logits)
    }

    /// [`Self::forward_into`]'s layers, logits into `ws.logits`.
    fn buffered_pass(
        &self,
        tokens: &[u32],
        seqs: &[SeqChunk],
        kv: &mut PagedKvView,
        ws: &mut Workspace,
    ) -> Result<()> {
        let (n, h) = (tokens.len(), self.config.hidden_size);
        ws.positions.clear();
        ws.positions.extend(seqs.iter().flat_map(|s| s.positions()));
        ws.rope_tables
            .resize_with(self.ropes.len(), Default::default);
        for (rope, (cos, sin)) in self.ropes.iter().zip(&mut ws.rope_tables) {
            rope.fill_tables(&ws.positions, cos, sin);
        }
        let x = sized(&mut ws.x, n * h);
        for (row, &id) in x.chunks_exact_mut(h).zip(tokens) {
            self.token_embd.row_into(id, row)?;
        }
        if let Some(scale) = self.config.embedding_scale {
            // As candle's affine op computes `x * scale` (plus 0).
            x.iter_mut().for_each(|v| *v = *v * scale + 0.0);
        }
        ws.last.clear();
        let mut end = 0;
        for seq in seqs {
            end += seq.len;
            ws.last.push(end - 1);
        }
        let mut rows = n;
        let n_layers = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            layer
                .attn_norm
                .forward_into(&ws.x, sized(&mut ws.normed, rows * h));
            let (cos, sin) = std::mem::take(&mut ws.rope_tables[layer.rope]);
            let rope = &self.ropes[layer.rope];
            let attended = layer
                .attention
                .forward_into(ws, rows, rope, (&cos, &sin), seqs, kv);
            ws.rope_tables[layer.rope] = (cos, sin);
            attended?;
            Self::add_branch(ws, layer.post_attn_norm.as_ref());
            if i + 1 == n_layers {
                // Only each chunk's last row goes on (see `forward`).
                for (j, &row) in ws.last.iter().enumerate() {
                    ws.x.copy_within(row * h..(row + 1) * h, j * h);
                }
                rows = seqs.len();
                ws.x.truncate(rows * h);
            }
            layer
                .ffn_norm
                .forward_into(&ws.x, sized(&mut ws.normed, rows * h));
            layer.mlp.forward_into(ws, rows)?;
            Self::add_branch(ws, layer.post_ffn_norm.as_ref());
        }
        self.output_norm
            .forward_into(&ws.x, sized(&mut ws.normed, rows * h));
        let logits = sized(&mut ws.logits, rows * self.config.vocab_size);
        self.lm_head
            .forward_into(&ws.normed, logits, &mut ws.matmul)
    }

    /// `x += branch`, normed first when the layer has a post-norm.
    fn add_branch(ws: &mut Workspace, post_norm: Option<&RmsNorm>) {
        let branch = match post_norm {
            Some(norm) => {
                norm.forward_into(&ws.branch, sized(&mut ws.normed, ws.branch.len()));
                &ws.normed
            }
            None => &ws.branch,
        };
        ws.x.iter_mut().zip(branch).for_each(|(x, b)| *x += b);
    }

    fn check_batch(&self, tokens: &[u32], seqs: &[SeqChunk]) -> Result<()> {
        let total: usize = seqs.iter().map(|s| s.len).sum();
        if total != tokens.len() || seqs.iter().any(|s| s.len == 0) {
            return Err(ModelError::InvalidBatch(format!(
                "{} tokens for chunks of lengths {:?}",
                tokens.len(),
                seqs.iter().map(|s| s.len).collect::<Vec<_>>()
            )));
        }
        if let Some(&bad) = tokens
            .iter()
            .find(|&&t| t as usize >= self.config.vocab_size)
        {
            return Err(ModelError::InvalidBatch(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        Ok(())
    }
}
