//! The decoder-only transformer shared by every supported architecture.

use std::path::Path;

use candle_core::Device;
use mlxr_formats::gguf::GgufFile;

use crate::backend::cpu::kernels::RowOrder;
use crate::backend::Backend;
use crate::config::ModelConfig;
use crate::layers::{Attention, Embedding, Linear, Mlp, RmsNorm, Rope};
use crate::partial_head::PartialHead;
use crate::pass::Activations;
use crate::step::Step;
use crate::tensor_parallel::{ShardPlan, ShardedWeights};
use crate::weights::{GgufWeights, SafetensorsWeights, Weights};
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
    /// This rank's part, in a tensor-parallel world of more than one.
    shard: Option<ShardPlan>,
}

impl DecoderModel {
    /// Loads for the CPU kernels with ggml's matmul order: bit-identical to
    /// llama.cpp.
    pub fn load(file: &GgufFile, device: &Device) -> Result<Self> {
        Self::load_with_kernels(file, device, Some(RowOrder::Ggml))
    }

    /// Loads with the CPU kernels' matmul order ([`RowOrder::Independent`]
    /// for a batching engine), or with `None` for candle's ops alone (the
    /// reference backend, or another device).
    pub fn load_with_kernels(
        file: &GgufFile,
        device: &Device,
        kernels: Option<RowOrder>,
    ) -> Result<Self> {
        let config = ModelConfig::from_gguf(file.metadata())?;
        let weights = GgufWeights::new(file, device).with_kernels(kernels);
        Self::from_weights(config, &weights, device)
    }

    /// Rank `rank`'s part of the model in `file` for a tensor-parallel world
    /// of `world` (see [`crate::tensor_parallel`]): its config has the
    /// rank's heads and intermediate width, its LM head the rank's
    /// vocabulary rows. It runs on a backend in that world (the CPU's
    /// [`crate::CpuBackend::with_collective`]), every rank the same steps;
    /// each gets the whole logits. A world of one is the whole model, as
    /// [`Self::load_with_kernels`] loads it.
    pub fn load_rank(
        file: &GgufFile,
        device: &Device,
        kernels: Option<RowOrder>,
        rank: usize,
        world: usize,
    ) -> Result<Self> {
        let config = ModelConfig::from_gguf(file.metadata())?;
        let plan = ShardPlan::for_gguf(&config, file, rank, world)?;
        let weights = GgufWeights::new(file, device).with_kernels(kernels);
        if world == 1 {
            return Self::from_weights(config, &weights, device);
        }
        let rank_config = plan.rank_config(&config);
        let weights = ShardedWeights::new(weights, &config, plan.clone());
        Self::build(rank_config, &weights, device, Some(plan))
    }

    /// [`Self::load_rank`] for a Hugging Face folder of float weights (F32,
    /// F16, BF16; quantized folders are refused).
    pub fn load_rank_dir(dir: &Path, device: &Device, rank: usize, world: usize) -> Result<Self> {
        let config = ModelConfig::from_hf_dir(dir)?;
        let plan = ShardPlan::with_blocks(&config, rank, world, [1, 1])?;
        let weights = SafetensorsWeights::open(dir, config.post_norms, device)?;
        if world == 1 {
            return Self::from_weights(config, &weights, device);
        }
        let rank_config = plan.rank_config(&config);
        let weights = ShardedWeights::new(weights, &config, plan.clone());
        Self::build(rank_config, &weights, device, Some(plan))
    }

    /// Loads a Hugging Face or MLX model folder (`config.json` and
    /// safetensors weights).
    pub fn load_dir(dir: &Path, device: &Device) -> Result<Self> {
        let config = ModelConfig::from_hf_dir(dir)?;
        let weights = SafetensorsWeights::open(dir, config.post_norms, device)?;
        Self::from_weights(config, &weights, device)
    }

    pub fn from_weights(config: ModelConfig, w: &dyn Weights, device: &Device) -> Result<Self> {
        Self::build(config, w, device, None)
    }

    fn build(
        config: ModelConfig,
        w: &dyn Weights,
        device: &Device,
        shard: Option<ShardPlan>,
    ) -> Result<Self> {
        let (h, eps, offset) = (config.hidden_size, config.rms_norm_eps, config.norm_offset);
        let norm = |name: &str| RmsNorm::load(w, name, h, eps, offset);

        let token_embd = w.embedding("token_embd.weight", config.vocab_size, h)?;
        // Files without `output.weight` tie the LM head to the embeddings.
        let head_rows = shard.as_ref().map_or(config.vocab_size, |s| s.vocab.len());
        let (token_embd, lm_head) = if w.contains("output.weight") {
            (token_embd, Linear::load(w, "output", head_rows, h)?)
        } else {
            token_embd.tie(w.kernels())?
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
        Ok(Self {
            output_norm: norm("output_norm.weight")?,
            config,
            device: device.clone(),
            token_embd,
            layers,
            ropes,
            lm_head,
            shard,
        })
    }

    /// This rank's part of a tensor-parallel model, `None` for a whole one.
    pub fn shard(&self) -> Option<&ShardPlan> {
        self.shard.as_ref()
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The forward pass, on any backend: the step's tokens through every
    /// layer, their keys and values into the backend's cache, each chunk's
    /// logits rows ([`Step::logit_rows`], `[rows, vocab_size]`) into `a.logits`.
    pub fn forward<B: Backend>(
        &self,
        b: &mut B,
        step: &Step,
        a: &mut Activations<B>,
    ) -> Result<()> {
        self.forward_head(b, step, a, None)
    }

    /// [`Self::forward`] with the logits of `head`'s tokens only
    /// (`[rows, head.tokens().len()]`) when there is one.
    pub fn forward_head<B: Backend>(
        &self,
        b: &mut B,
        step: &Step,
        a: &mut Activations<B>,
        head: Option<&PartialHead>,
    ) -> Result<()> {
        self.check_tokens(step.tokens())?;
        if head.is_some() && self.shard.is_some() {
            return Err(ModelError::InvalidConfig(
                "a partial LM head on a tensor-parallel model".into(),
            ));
        }
        b.begin_step(step, &self.ropes)?;
        let lm_head = head.map_or(&self.lm_head, |h| &h.linear);
        b.execute(step, a, |b, a| self.layers(b, step, a, lm_head))
    }

    /// The pass after [`Backend::begin_step`]: embedding, layers, logits.
    fn layers<B: Backend>(
        &self,
        b: &mut B,
        step: &Step,
        a: &mut Activations<B>,
        lm_head: &Linear,
    ) -> Result<()> {
        b.embed(&self.token_embd, step.tokens(), &mut a.x)?;
        if let Some(scale) = self.config.embedding_scale {
            b.scale(&mut a.x, scale)?;
        }
        let n_layers = self.layers.len();
        match self.layers.first() {
            Some(first) => b.rms_norm(&a.x, &first.attn_norm, &mut a.normed)?,
            None => b.rms_norm(&a.x, &self.output_norm, &mut a.normed)?,
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let rope = &self.ropes[layer.rope];
            layer.attention.forward(b, a, rope, layer.rope, step)?;
            self.all_reduce(b, &mut a.branch)?;
            if i + 1 == n_layers {
                // Only each chunk's last token (or a verified draft's
                // tokens) needs logits. Its rows are
                // picked after the last layer's attention (which needs every
                // row's keys and values), so that layer's MLP runs on them
                // alone, as in llama.cpp.
                Self::add_branch(b, a, layer.post_attn_norm.as_ref())?;
                b.select_rows(&mut a.x, step.logit_rows(), self.config.hidden_size)?;
                b.rms_norm(&a.x, &layer.ffn_norm, &mut a.normed)?;
            } else {
                Self::add_branch_norm(b, a, layer.post_attn_norm.as_ref(), &layer.ffn_norm)?;
            }
            layer.mlp.forward(b, a)?;
            self.all_reduce(b, &mut a.branch)?;
            // The residual add, then the norm that reads it: the next
            // layer's attention norm, or the output norm after the last.
            let next = self
                .layers
                .get(i + 1)
                .map_or(&self.output_norm, |l| &l.attn_norm);
            Self::add_branch_norm(b, a, layer.post_ffn_norm.as_ref(), next)?;
        }
        b.matmul(&a.normed, lm_head, &mut a.logits)?;
        if self.shard.is_some() {
            b.all_gather_cols(&mut a.logits, step.logit_rows().len())?;
        }
        if let Some(cap) = self.config.final_logit_softcap {
            b.softcap(&mut a.logits, cap)?;
        }
        Ok(())
    }

    /// The ranks' partial outputs of a row-parallel matmul summed, in a
    /// tensor-parallel model.
    fn all_reduce<B: Backend>(&self, b: &mut B, branch: &mut B::Act) -> Result<()> {
        match self.shard {
            Some(_) => b.all_reduce(branch),
            None => Ok(()),
        }
    }

    /// `x += branch`, normed first when the layer has a post-norm.
    fn add_branch<B: Backend>(
        b: &mut B,
        a: &mut Activations<B>,
        post_norm: Option<&RmsNorm>,
    ) -> Result<()> {
        match post_norm {
            Some(norm) => {
                b.rms_norm(&a.branch, norm, &mut a.normed)?;
                b.add(&mut a.x, &a.normed)
            }
            None => b.add(&mut a.x, &a.branch),
        }
    }

    /// `x += branch` (normed first when the layer has a post-norm), then
    /// `a.normed` = `norm` of `x`.
    fn add_branch_norm<B: Backend>(
        b: &mut B,
        a: &mut Activations<B>,
        post_norm: Option<&RmsNorm>,
        norm: &RmsNorm,
    ) -> Result<()> {
        match post_norm {
            Some(post) => {
                b.rms_norm(&a.branch, post, &mut a.normed)?;
                b.add_rms_norm(&mut a.x, &a.normed, norm, &mut a.branch)?;
                std::mem::swap(&mut a.normed, &mut a.branch);
                Ok(())
            }
            None => b.add_rms_norm(&mut a.x, &a.branch, norm, &mut a.normed),
        }
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
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
