use candle_core::{DType, Tensor};

use crate::config::{Activation, ModelConfig};
use crate::kernels::ops::GluOp;
use crate::layers::Linear;
use crate::weights::Weights;
use crate::Result;

/// Gated feed-forward block: `down(act(gate(x)) * up(x))`.
pub struct Mlp {
    gate_up: GateUp,
    down: Linear,
    activation: Activation,
}

enum GateUp {
    Split {
        gate: Linear,
        up: Linear,
    },
    /// One matrix with the gate rows first, then the up rows (Phi-3).
    Fused(Linear),
}

impl Mlp {
    pub fn load(w: &dyn Weights, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let gate_up = if w.contains(&format!("{prefix}.ffn_gate.weight")) {
            GateUp::Split {
                gate: Linear::load(w, &format!("{prefix}.ffn_gate"), i, h)?,
                up: Linear::load(w, &format!("{prefix}.ffn_up"), i, h)?,
            }
        } else {
            GateUp::Fused(Linear::load(w, &format!("{prefix}.ffn_up"), 2 * i, h)?)
        };
        Ok(Self {
            gate_up,
            down: Linear::load(w, &format!("{prefix}.ffn_down"), h, i)?,
            activation: cfg.activation,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (gate, up, ggml) = match &self.gate_up {
            GateUp::Split { gate, up } => {
                (gate.forward(x)?, up.forward(x)?, gate.is_ggml_quantized())
            }
            GateUp::Fused(both) => {
                let y = both.forward(x)?;
                let i = y.dim(1)? / 2;
                (
                    y.narrow(1, 0, i)?,
                    y.narrow(1, i, i)?,
                    both.is_ggml_quantized(),
                )
            }
        };
        // ggml's fused SwiGLU/GeGLU, bit for bit. ggml's GELU is an f16 table
        // lookup (about 1e-3 relative error); with dequantized f32 weights
        // (the transformers comparison) the exact tanh GELU runs instead.
        let gelu = self.activation == Activation::GeluTanh;
        if gate.device().is_cpu() && gate.dtype() == DType::F32 && (!gelu || ggml) {
            let h = gate
                .contiguous()?
                .apply_op2_no_bwd(&up.contiguous()?, &GluOp { gelu })?;
            return self.down.forward(&h);
        }
        let gate = match self.activation {
            Activation::Silu => candle_nn::ops::silu(&gate)?,
            Activation::GeluTanh => gate.gelu()?,
        };
        self.down.forward(&(gate * up)?)
    }
}
