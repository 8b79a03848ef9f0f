use candle_core::{DType, Tensor};

use crate::config::{Activation, ModelConfig};
use crate::kernels::ops::GluOp;
use crate::layers::QLinear;
use crate::weights::GgufWeights;
use crate::Result;

/// Gated feed-forward block: `down(act(gate(x)) * up(x))`.
pub struct Mlp {
    gate: QLinear,
    up: QLinear,
    down: QLinear,
    activation: Activation,
}

impl Mlp {
    pub fn load(w: &GgufWeights, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Self {
            gate: QLinear::load(w, &format!("{prefix}.ffn_gate.weight"), i, h)?,
            up: QLinear::load(w, &format!("{prefix}.ffn_up.weight"), i, h)?,
            down: QLinear::load(w, &format!("{prefix}.ffn_down.weight"), h, i)?,
            activation: cfg.activation,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = self.gate.forward(x)?;
        // ggml's fused SwiGLU/GeGLU, bit for bit. ggml's GELU is an f16 table
        // lookup (about 1e-3 relative error); with dequantized f32 weights
        // (the transformers comparison) the exact tanh GELU runs instead.
        let gelu = self.activation == Activation::GeluTanh;
        if gate.device().is_cpu()
            && gate.dtype() == DType::F32
            && (!gelu || self.gate.is_quantized())
        {
            let up = self.up.forward(x)?;
            let h = gate
                .contiguous()?
                .apply_op2_no_bwd(&up.contiguous()?, &GluOp { gelu })?;
            return self.down.forward(&h);
        }
        let gate = match self.activation {
            Activation::Silu => candle_nn::ops::silu(&gate)?,
            Activation::GeluTanh => gate.gelu()?,
        };
        let up = self.up.forward(x)?;
        self.down.forward(&(gate * up)?)
    }
}
