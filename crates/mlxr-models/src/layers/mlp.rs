use candle_core::Tensor;

use crate::config::{Activation, ModelConfig};
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
        let gate = match self.activation {
            Activation::Silu => candle_nn::ops::silu(&gate)?,
            Activation::GeluTanh => gate.gelu()?,
        };
        let up = self.up.forward(x)?;
        self.down.forward(&(gate * up)?)
    }
}
