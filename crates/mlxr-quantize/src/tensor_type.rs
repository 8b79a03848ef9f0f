//! Which type each tensor gets in a mix: llama.cpp's
//! `llama_tensor_get_type` (llama-quant.cpp) without an importance matrix,
//! overrides or `--pure`, for the k-quant and 32-block mixes.
//!
//! The rules depend on a tensor's role (from its name), on its layer (the
//! n-th attn_v or ffn_down seen, in llama.cpp's tensor order, see
//! [`llama_order`]) and on a few hyperparameters (layers, GQA, experts).

use std::cmp::Ordering;

use mlxr_formats::gguf::{GgmlType, GgufFile, TensorInfo};

use crate::{FileType, QuantizeError};

/// The hyperparameters the rules read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelShape {
    pub arch: String,
    pub n_layer: i64,
    pub n_head: i64,
    pub n_head_kv: i64,
    pub n_expert: i64,
}

impl ModelShape {
    /// Reads `{arch}.block_count`, `.attention.head_count(_kv)` (the first
    /// layer's where they are per layer) and `.expert_count`.
    pub fn from_gguf(file: &GgufFile) -> Result<ModelShape, QuantizeError> {
        let md = file.metadata();
        let arch = md.get_str("general.architecture")?.to_string();
        let first = |key: &str| -> Result<Option<i64>, QuantizeError> {
            let key = format!("{arch}.{key}");
            if md.get(&key).is_none() {
                return Ok(None);
            }
            match md.get_u64(&key) {
                Ok(v) => Ok(Some(v as i64)),
                Err(_) => Ok(md.get_u32_array(&key)?.first().map(|&v| v as i64)),
            }
        };
        let n_layer = first("block_count")?
            .ok_or_else(|| QuantizeError::Metadata(format!("{arch}.block_count is missing")))?;
        let n_head = first("attention.head_count")?.unwrap_or(0);
        let n_head_kv = first("attention.head_count_kv")?.unwrap_or(n_head);
        let n_expert = first("expert_count")?.unwrap_or(0);
        Ok(ModelShape {
            arch,
            n_layer,
            n_head,
            n_head_kv,
            n_expert,
        })
    }

    fn n_gqa(&self) -> i64 {
        if self.n_head_kv == 0 {
            0
        } else {
            self.n_head / self.n_head_kv
        }
    }

    /// llama.cpp's `LLM_TYPE_70B` (Llama 2/3 70B: 80 layers with GQA).
    fn is_70b(&self) -> bool {
        self.arch == "llama" && self.n_layer == 80 && self.n_head != self.n_head_kv
    }

    fn is_falcon(&self) -> bool {
        self.arch == "falcon"
    }
}

/// One input tensor and the type it is written as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    pub info: TensorInfo,
    pub target: GgmlType,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Category {
    Output,
    TokenEmbd,
    AttnQkv,
    AttnKvB,
    AttnV,
    AttnK,
    AttnQ,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

impl Category {
    fn of(name: &str) -> Category {
        use Category::*;
        if name == "output.weight" {
            return Output;
        }
        if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
            return TokenEmbd;
        }
        let table = [
            ("attn_qkv.weight", AttnQkv),
            ("attn_kv_b.weight", AttnKvB),
            ("attn_v.weight", AttnV),
            ("attn_k.weight", AttnK),
            ("attn_q.weight", AttnQ),
            ("attn_output.weight", AttnOutput),
            ("ffn_up", FfnUp),
            ("ffn_gate", FfnGate),
            ("ffn_down", FfnDown),
        ];
        table
            .iter()
            .find(|(part, _)| name.contains(part))
            .map_or(Other, |&(_, c)| c)
    }

    fn is_attn_v(self) -> bool {
        matches!(
            self,
            Category::AttnV | Category::AttnQkv | Category::AttnKvB
        )
    }
}

/// The layer in a `blk.N.` name, -1 for none (llama.cpp's `sscanf`).
fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().unwrap_or(-1)
}

/// llama.cpp's tensor order (its loader's map): tensors outside layers
/// first, then by layer, by name within each.
pub fn llama_order(a: &str, b: &str) -> Ordering {
    (layer_of(a), a).cmp(&(layer_of(b), b))
}

/// Number of dimensions as ggml counts them (trailing 1s do not count).
fn n_dims(dims: &[u64]) -> usize {
    dims.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1)
}

/// llama.cpp's `tensor_allows_quantization` for a default run.
fn allows_quantization(name: &str, dims: &[u64]) -> bool {
    const NEVER: &[&str] = &[
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ];
    n_dims(dims) >= 2
        && name.ends_with("weight")
        && name != "position_embd.weight"
        && name != "token_types.weight"
        && !NEVER.iter().any(|p| name.contains(p))
}

fn use_more_bits(i_layer: i64, n_layers: i64) -> bool {
    i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2
}

/// Counters of llama.cpp's `quantize_state_impl`.
struct State<'a> {
    shape: &'a ModelShape,
    ftype: FileType,
    n_attention_wv: i64,
    i_attention_wv: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
    has_tied_embeddings: bool,
}

impl State<'_> {
    /// The layer of a per-layer tensor: its position among its kind, or
    /// for mixture-of-experts models the `blk.N.` in its name.
    fn layer(&self, counter: i64, name: &str) -> Result<(i64, i64), QuantizeError> {
        let n_layer = self.shape.n_layer;
        if self.shape.n_expert > 1 {
            let i = layer_of(name);
            if i < 0 || i >= n_layer {
                return Err(QuantizeError::Tensor {
                    tensor: name.into(),
                    message: format!("no layer in [0, {n_layer}) in its name"),
                });
            }
            return Ok((i, n_layer));
        }
        Ok((counter, n_layer))
    }

    /// llama.cpp's `llama_tensor_get_type_impl` for the mixes of [`FileType`].
    fn mix_type(
        &mut self,
        name: &str,
        ne0: u64,
        category: Category,
    ) -> Result<GgmlType, QuantizeError> {
        use FileType as F;
        use GgmlType as T;
        let ftype = self.ftype;
        let shape = self.shape;
        let mut new_type = ftype.default_type();
        if category == Category::Output
            || (self.has_tied_embeddings && category == Category::TokenEmbd)
        {
            if shape.is_falcon() || !ne0.is_multiple_of(new_type.block_size()) {
                new_type = T::Q8_0;
            } else if new_type != T::Q8_0 {
                new_type = T::Q6_K;
            }
        } else if category == Category::TokenEmbd {
            // Only i-quant and ternary mixes change it.
        } else if category.is_attn_v() {
            if ftype == F::Q2_K {
                new_type = if shape.n_gqa() >= 4 { T::Q4_K } else { T::Q3_K };
            } else if ftype == F::Q3_K_M {
                new_type = if self.i_attention_wv < 2 {
                    T::Q5_K
                } else {
                    T::Q4_K
                };
            } else if ftype == F::Q3_K_L {
                new_type = T::Q5_K;
            } else if (ftype == F::Q4_K_M || ftype == F::Q5_K_M)
                && use_more_bits(self.i_attention_wv, self.n_attention_wv)
            {
                new_type = T::Q6_K;
            } else if ftype == F::Q4_K_S && self.i_attention_wv < 4 {
                new_type = T::Q5_K;
            }
            if shape.is_70b() && (new_type == T::Q3_K || new_type == T::Q4_K) {
                new_type = T::Q5_K;
            }
            if shape.n_expert == 8 {
                new_type = T::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if category == Category::AttnK {
            if shape.n_expert == 8 {
                new_type = T::Q8_0;
            }
        } else if category == Category::FfnDown {
            let (i_layer, n_layer) = self.layer(self.i_ffn_down, name)?;
            let falcon = shape.is_falcon();
            match ftype {
                F::Q2_K => new_type = T::Q3_K,
                F::Q3_K_M => {
                    new_type = if i_layer < n_layer / 16 {
                        T::Q5_K
                    } else if !falcon || use_more_bits(i_layer, n_layer) {
                        T::Q4_K
                    } else {
                        T::Q3_K
                    }
                }
                F::Q3_K_L => new_type = if falcon { T::Q4_K } else { T::Q5_K },
                F::Q4_K_M => {
                    if falcon {
                        new_type = if i_layer < n_layer / 16 {
                            T::Q6_K
                        } else if use_more_bits(i_layer, n_layer) {
                            T::Q5_K
                        } else {
                            T::Q4_K
                        };
                    } else if use_more_bits(i_layer, n_layer) {
                        new_type = T::Q6_K;
                    }
                }
                F::Q5_K_M if use_more_bits(i_layer, n_layer) => new_type = T::Q6_K,
                F::Q4_K_S if !falcon && i_layer < n_layer / 8 => new_type = T::Q5_K,
                _ => {}
            }
            self.i_ffn_down += 1;
        } else if category == Category::AttnOutput {
            if !shape.is_falcon() {
                if shape.n_expert == 8 {
                    if matches!(
                        ftype,
                        F::Q2_K | F::Q3_K_S | F::Q3_K_M | F::Q4_K_S | F::Q4_K_M
                    ) {
                        new_type = T::Q5_K;
                    }
                } else {
                    match ftype {
                        F::Q2_K => new_type = T::Q3_K,
                        F::Q3_K_M => new_type = T::Q4_K,
                        F::Q3_K_L => new_type = T::Q5_K,
                        _ => {}
                    }
                }
            } else if ftype == F::Q3_K_L {
                new_type = T::Q4_K;
            }
        } else if category == Category::AttnQkv {
            match ftype {
                F::Q3_K_M | F::Q3_K_L => new_type = T::Q4_K,
                F::Q4_K_M => new_type = T::Q5_K,
                F::Q5_K_M => new_type = T::Q6_K,
                _ => {}
            }
        } else if category == Category::FfnGate {
            self.layer(self.i_ffn_gate, name)?;
            self.i_ffn_gate += 1;
        } else if category == Category::FfnUp {
            self.layer(self.i_ffn_up, name)?;
            self.i_ffn_up += 1;
        }
        Ok(new_type)
    }
}

/// llama.cpp's `tensor_type_fallback`: a row that is not whole blocks of
/// the chosen type takes a 32-block type instead, or F16.
fn fallback(ne0: u64, ty: GgmlType) -> GgmlType {
    use GgmlType as T;
    if ne0.is_multiple_of(ty.block_size()) {
        return ty;
    }
    let demoted = match ty {
        T::Q2_K | T::Q3_K => T::Q4_0,
        T::Q4_K => T::Q5_0,
        T::Q5_K => T::Q5_1,
        T::Q6_K => T::Q8_0,
        other => other,
    };
    if ne0.is_multiple_of(demoted.block_size()) {
        demoted
    } else {
        T::F16
    }
}

/// The type of every tensor of `file` in `ftype`, in llama.cpp's order
/// (which is also the order llama-quantize writes them in).
pub fn plan_tensor_types(
    file: &GgufFile,
    ftype: FileType,
) -> Result<Vec<TensorPlan>, QuantizeError> {
    let shape = ModelShape::from_gguf(file)?;
    let mut tensors: Vec<TensorInfo> = file.tensors().to_vec();
    tensors.sort_by(|a, b| llama_order(&a.name, &b.name));
    let categories: Vec<Category> = tensors.iter().map(|t| Category::of(&t.name)).collect();
    let mut state = State {
        shape: &shape,
        ftype,
        n_attention_wv: categories.iter().filter(|c| c.is_attn_v()).count() as i64,
        i_attention_wv: 0,
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
        has_tied_embeddings: !categories.contains(&Category::Output),
    };
    let default = ftype.default_type();
    let quantized_mix = default.block_size() > 1;
    let mut plan = Vec::with_capacity(tensors.len());
    for (info, category) in tensors.into_iter().zip(categories) {
        let target = if !allows_quantization(&info.name, &info.dims) {
            info.ggml_type
        } else if quantized_mix {
            let ne0 = info.dims.first().copied().unwrap_or(1);
            fallback(ne0, state.mix_type(&info.name, ne0, category)?)
        } else {
            default
        };
        plan.push(TensorPlan { info, target });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_order_puts_layers_after_globals_and_in_number_order() {
        let mut names = vec![
            "blk.10.attn_q.weight",
            "blk.2.ffn_down.weight",
            "output.weight",
            "blk.2.attn_q.weight",
            "token_embd.weight",
        ];
        names.sort_by(|a, b| llama_order(a, b));
        assert_eq!(
            names,
            [
                "output.weight",
                "token_embd.weight",
                "blk.2.attn_q.weight",
                "blk.2.ffn_down.weight",
                "blk.10.attn_q.weight"
            ]
        );
    }

    #[test]
    fn norms_and_vectors_are_never_quantized() {
        assert!(!allows_quantization("blk.0.attn_norm.weight", &[256]));
        assert!(!allows_quantization("blk.0.attn_q.weight", &[256, 1]));
        assert!(!allows_quantization("blk.0.attn_q.bias", &[256, 4]));
        assert!(allows_quantization("blk.0.attn_q.weight", &[256, 4]));
    }

    #[test]
    fn fallbacks_follow_llama_cpp() {
        assert_eq!(fallback(96, GgmlType::Q4_K), GgmlType::Q5_0);
        assert_eq!(fallback(96, GgmlType::Q5_K), GgmlType::Q5_1);
        assert_eq!(fallback(96, GgmlType::Q6_K), GgmlType::Q8_0);
        assert_eq!(fallback(96, GgmlType::Q3_K), GgmlType::Q4_0);
        assert_eq!(fallback(100, GgmlType::Q6_K), GgmlType::F16);
        assert_eq!(fallback(512, GgmlType::Q6_K), GgmlType::Q6_K);
    }
}
