use crate::backend::{Backend, Glu};
use crate::config::ModelConfig;
use crate::layers::{Linear, Projections};
use crate::pass::Activations;
use crate::weights::Weights;
use crate::Result;

/// Gated feed-forward block: `down(act(gate(x)) * up(x))`.
pub struct Mlp {
    /// The gate, then the up projection.
    gate_up: Projections,
    down: Linear,
    glu: Glu,
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
        // ggml's GELU (an f16 table) where the weights are ggml's, so the
        // result is llama.cpp's; the f32 GELU for float weights.
        let glu = Glu::new(cfg.activation, gate_up.is_ggml_quantized());
        Ok(Self {
            gate_up,
            down: Linear::load(w, &format!("{prefix}.ffn_down"), h, i)?,
            glu,
        })
    }

    /// `a.normed` `[tokens, hidden]` in, the down projection into `a.branch`.
    pub fn forward<B: Backend>(&self, b: &mut B, a: &mut Activations<B>) -> Result<()> {
        let Activations {
            normed,
            gate,
            up,
            act,
            branch,
            stacked,
            ..
        } = a;
        self.gate_up.forward(b, normed, &mut [gate, up], stacked)?;
        b.glu(gate, up, self.glu, act)?;
        b.matmul(act, &self.down, branch)
    }
}
