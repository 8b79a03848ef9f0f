//! llama.cpp's tensor names → the names Hugging Face checkpoints (and MLX
//! conversions of them) use.

/// The Hugging Face name of `canonical` (`blk.3.attn_q.weight` →
/// `model.layers.3.self_attn.q_proj.weight`), given the prefix the layers
/// live under and whether the model has Gemma's sandwich norms. `exists`
/// picks between fused and split names (Phi-3's `gate_up_proj`).
pub fn hf_name(
    canonical: &str,
    prefix: &str,
    post_norms: bool,
    exists: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let (stem, suffix) = canonical.rsplit_once('.')?;
    let mapped = match stem {
        "token_embd" => format!("{prefix}embed_tokens"),
        "output_norm" => format!("{prefix}norm"),
        "output" => "lm_head".to_string(),
        _ => {
            let rest = stem.strip_prefix("blk.")?;
            let (layer, part) = rest.split_once('.')?;
            let within = match part {
                "attn_norm" => "input_layernorm",
                "ffn_norm" if post_norms => "pre_feedforward_layernorm",
                "ffn_norm" => "post_attention_layernorm",
                "post_attention_norm" => "post_attention_layernorm",
                "post_ffw_norm" => "post_feedforward_layernorm",
                "attn_q" => "self_attn.q_proj",
                "attn_k" => "self_attn.k_proj",
                "attn_v" => "self_attn.v_proj",
                "attn_qkv" => "self_attn.qkv_proj",
                "attn_output" => "self_attn.o_proj",
                "attn_q_norm" => "self_attn.q_norm",
                "attn_k_norm" => "self_attn.k_norm",
                "ffn_gate" => "mlp.gate_proj",
                "ffn_down" => "mlp.down_proj",
                "ffn_up" => {
                    let split = format!("{prefix}layers.{layer}.mlp.up_proj.{suffix}");
                    if exists(&split) {
                        "mlp.up_proj"
                    } else {
                        "mlp.gate_up_proj"
                    }
                }
                _ => return None,
            };
            format!("{prefix}layers.{layer}.{within}")
        }
    };
    Some(format!("{mapped}.{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::hf_name;

    #[test]
    fn names() {
        let none = |_: &str| false;
        let n = |c: &str, post: bool| hf_name(c, "model.", post, &none).unwrap();
        assert_eq!(n("token_embd.weight", false), "model.embed_tokens.weight");
        assert_eq!(n("output.weight", false), "lm_head.weight");
        assert_eq!(
            n("blk.3.attn_q.bias", false),
            "model.layers.3.self_attn.q_proj.bias"
        );
        assert_eq!(
            n("blk.0.ffn_norm.weight", false),
            "model.layers.0.post_attention_layernorm.weight"
        );
        assert_eq!(
            n("blk.0.ffn_norm.weight", true),
            "model.layers.0.pre_feedforward_layernorm.weight"
        );
        assert_eq!(
            n("blk.1.ffn_up.weight", false),
            "model.layers.1.mlp.gate_up_proj.weight"
        );
        let split = |s: &str| s.ends_with("up_proj.weight");
        assert_eq!(
            hf_name("blk.1.ffn_up.weight", "model.", false, &split).unwrap(),
            "model.layers.1.mlp.up_proj.weight"
        );
        assert!(hf_name("blk.1.unknown.weight", "model.", false, &none).is_none());
    }
}
