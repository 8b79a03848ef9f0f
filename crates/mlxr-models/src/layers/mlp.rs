use candle_core::{DType, Tensor};

use crate::config::{Activation, ModelConfig};
use crate::kernels::ops::GluOp;
use crate::layers::{Linear, Projections};
use crate::weights::Weights;
use crate::workspace::{sized, Workspace};
use crate::Result;

/// Gated feed-forward block: `down(act(gate(x)) * up(x))`.
pub struct Mlp {
    /// The gate, then the up projection.
    gate_up: Projections,
    down: Linear,
    activation: Activation,
}

impl Mlp {
    pub fn load(w: &dyn Weights, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let gate_up = if w.contains(&format!("{prefix}.ffn_gate.weight")) {
            let layer = |name: &str| (format!("{prefix}.{name}"), i);
            Projections::load(w, &[layer("ffn_gate"), layer("ffn_up")], h)?
        } else {
            // One matrix with the gate rows first, then the up rows (Phi-3).
            let both = Linear::load(w, &format!("{prefix}.ffn_up"), 2 * i, h)?;
            Projections::stored_stacked(both, vec![i, i])
        };
        Ok(Self {
            gate_up,
            down: Linear::load(w, &format!("{prefix}.ffn_down"), h, i)?,
            activation: cfg.activation,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let ggml = self.gate_up.is_ggml_quantized();
        let [gate, up]: [Tensor; 2] = self
            .gate_up
            .forward(x)?
            .try_into()
            .expect("two projections");
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

    /// Whether every projection has a kernel for [`Self::forward_into`].
    pub fn has_kernels(&self) -> bool {
        self.gate_up.has_kernels() && self.down.has_kernel()
    }

    /// [`Self::forward`] over `ws`, bit for bit (on the kernels' path):
    /// `ws.normed` `[tokens, hidden]` in, the down projection into `ws.branch`.
    pub fn forward_into(&self, ws: &mut Workspace, tokens: usize) -> Result<()> {
        let Workspace {
            normed,
            gate,
            up,
            act,
            branch,
            stacked,
            matmul,
            ..
        } = ws;
        let inter = self.down.cols();
        let gate = sized(gate, tokens * inter);
        let up = sized(up, tokens * inter);
        self.gate_up
            .forward_into(normed, tokens, &mut [&mut *gate, &mut *up], stacked, matmul)?;
        let act = sized(act, tokens * inter);
        let gelu = self.activation == Activation::GeluTanh;
        GluOp { gelu }.rows(gate, up, inter, act);
        let hidden = self.down.rows();
        self.down
            .forward_into(act, sized(branch, tokens * hidden), matmul)
    }
}
