//! The BERT encoder on candle ops: embeddings + LayerNorm, then post-LN layers
//! of masked self-attention and a GELU (erf) feed-forward network.

use candle_core::{DType, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::config::BertConfig;

/// Added to the attention scores of padding positions. Like transformers'
/// `finfo(float32).min` it underflows to exactly 0 after the softmax, so
/// padding contributes nothing.
const MASKED_SCORE: f32 = f32::MIN;

pub struct BertEncoder {
    embeddings: BertEmbeddings,
    layers: Vec<BertLayer>,
    num_heads: usize,
    head_dim: usize,
}

impl BertEncoder {
    /// Loads the weights under `vb` (the folder's "bert." prefix, if any,
    /// already applied).
    pub fn load(vb: VarBuilder, config: &BertConfig) -> candle_core::Result<Self> {
        let embeddings = BertEmbeddings::load(vb.pp("embeddings"), config)?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| BertLayer::load(vb.pp(format!("encoder.layer.{i}")), config))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Self {
            embeddings,
            layers,
            num_heads: config.num_attention_heads,
            head_dim: config.head_dim(),
        })
    }

    /// `input_ids`: `[batch, seq]` u32; `attention_mask`: `[batch, seq]` f32,
    /// 1 for real tokens and 0 for padding. Returns the last hidden states,
    /// `[batch, seq, hidden]`.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let (batch, seq) = input_ids.dims2()?;
        // [batch, 1, 1, seq]: 0 where attended, MASKED_SCORE on padding.
        let mask_bias = ((attention_mask.ones_like()? - attention_mask)? * MASKED_SCORE as f64)?
            .reshape((batch, 1, 1, seq))?;
        let mut hidden = self.embeddings.forward(input_ids)?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &mask_bias, self.num_heads, self.head_dim)?;
        }
        Ok(hidden)
    }
}

struct BertEmbeddings {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
}

impl BertEmbeddings {
    fn load(vb: VarBuilder, config: &BertConfig) -> candle_core::Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            word: candle_nn::embedding(config.vocab_size, h, vb.pp("word_embeddings"))?,
            position: candle_nn::embedding(
                config.max_position_embeddings,
                h,
                vb.pp("position_embeddings"),
            )?,
            token_type: candle_nn::embedding(
                config.type_vocab_size,
                h,
                vb.pp("token_type_embeddings"),
            )?,
            norm: layer_norm(h, config.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, input_ids: &Tensor) -> candle_core::Result<Tensor> {
        let (_, seq) = input_ids.dims2()?;
        let device = input_ids.device();
        let positions = Tensor::arange(0u32, seq as u32, device)?.unsqueeze(0)?;
        // Single-sentence inputs: every token type is 0.
        let token_types = Tensor::zeros((1, seq), DType::U32, device)?;
        let x = self
            .word
            .forward(input_ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .broadcast_add(&self.token_type.forward(&token_types)?)?;
        self.norm.forward(&x)
    }
}

struct BertLayer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

impl BertLayer {
    fn load(vb: VarBuilder, config: &BertConfig) -> candle_core::Result<Self> {
        let (h, i, eps) = (
            config.hidden_size,
            config.intermediate_size,
            config.layer_norm_eps,
        );
        let attention = vb.pp("attention");
        let self_attention = attention.pp("self");
        Ok(Self {
            query: candle_nn::linear(h, h, self_attention.pp("query"))?,
            key: candle_nn::linear(h, h, self_attention.pp("key"))?,
            value: candle_nn::linear(h, h, self_attention.pp("value"))?,
            attention_out: candle_nn::linear(h, h, attention.pp("output.dense"))?,
            attention_norm: layer_norm(h, eps, attention.pp("output.LayerNorm"))?,
            intermediate: candle_nn::linear(h, i, vb.pp("intermediate.dense"))?,
            output: candle_nn::linear(i, h, vb.pp("output.dense"))?,
            output_norm: layer_norm(h, eps, vb.pp("output.LayerNorm"))?,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        mask_bias: &Tensor,
        num_heads: usize,
        head_dim: usize,
    ) -> candle_core::Result<Tensor> {
        let (batch, seq, hidden) = x.dims3()?;
        let heads = |t: Tensor| {
            t.reshape((batch, seq, num_heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = heads(self.query.forward(x)?)?;
        let k = heads(self.key.forward(x)?)?;
        let v = heads(self.value.forward(x)?)?;

        let scale = 1.0 / (head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?.broadcast_add(mask_bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, seq, hidden))?;

        let attended = self
            .attention_norm
            .forward(&(x + self.attention_out.forward(&context)?)?)?;
        let ffn = self
            .output
            .forward(&self.intermediate.forward(&attended)?.gelu_erf()?)?;
        self.output_norm.forward(&(attended + ffn)?)
    }
}

/// LayerNorm weights are "weight"/"bias", or "gamma"/"beta" in old checkpoints.
fn layer_norm(size: usize, eps: f64, vb: VarBuilder) -> candle_core::Result<LayerNorm> {
    let (weight, bias) = if vb.contains_tensor("weight") {
        (vb.get(size, "weight")?, vb.get(size, "bias")?)
    } else {
        (vb.get(size, "gamma")?, vb.get(size, "beta")?)
    };
    Ok(LayerNorm::new(weight, bias, eps))
}
