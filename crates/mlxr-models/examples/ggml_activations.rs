//! Debug tool: runs our layers step by step on the tokens of a llama.cpp
//! activation dump (scripts/llamacpp-reference/dump-activations.cpp) and
//! reports, per named intermediate tensor, whether it is bit-identical to
//! llama.cpp's.
//!
//!   cargo run --release -p mlxr-models --example ggml_activations -- MODEL.gguf DUMP_DIR
//!
//! DUMP_DIR holds `prompt.txt`, `tokens.txt` and one folder per pass.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::backend::cpu::kernels::attention::{attention, AttnShape};
use mlxr_models::backend::cpu::kernels::ggml_f32;
use mlxr_models::config::{Activation, RopeStyle};
use mlxr_models::layers::{Linear, Rope};
use mlxr_models::weights::{GgufWeights, Weights};
use mlxr_models::{Backend, CpuBackend, KvGeometry, ModelConfig};

struct Dump {
    files: HashMap<String, PathBuf>,
    first_bad: Option<String>,
}

impl Dump {
    fn new(dir: &Path) -> Self {
        let mut files = HashMap::new();
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        let mut prev = String::new();
        for p in names {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            // NNNN-name-OP: keep the first file of each name+op; unnamed
            // nodes are known by the tensor before them.
            let mut key = stem[5..].to_string();
            if key.starts_with("node_") {
                key = format!("after:{prev}");
            }
            prev = key.clone();
            files.entry(key).or_insert(p);
        }
        Self {
            files,
            first_bad: None,
        }
    }

    fn cmp(&mut self, key: &str, ours: &[f32]) {
        let alias = match key.split_once('-') {
            Some(("attn_out", rest)) => {
                format!("after:kqv_out-{}", rest.replace("MUL_MAT", "CONT"))
            }
            _ => String::new(),
        };
        let Some(path) = self.files.get(key).or_else(|| self.files.get(&alias)) else {
            println!("  {key:<28} (not in dump)");
            return;
        };
        let bytes = std::fs::read(path).unwrap();
        let theirs: Vec<f32> = bytes[16..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        // llama.cpp keeps only the output rows in the last layer.
        let ours = if theirs.len() < ours.len() {
            &ours[ours.len() - theirs.len()..]
        } else {
            ours
        };
        if theirs.len() != ours.len() {
            println!("  {key:<28} size {} vs {}", ours.len(), theirs.len());
            return;
        }
        let mut bad = 0;
        let mut max = 0f32;
        let mut at = 0;
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            if a.to_bits() != b.to_bits() {
                bad += 1;
                if (a - b).abs() > max {
                    max = (a - b).abs();
                    at = i;
                }
            }
        }
        if bad == 0 {
            println!("  {key:<28} identical ({} values)", ours.len());
        } else {
            println!(
                "  {key:<28} {bad}/{} differ, max |diff| {max:e} at {at} (ours {} llama.cpp {})",
                ours.len(),
                ours[at],
                theirs[at]
            );
            if self.first_bad.is_none() {
                self.first_bad = Some(key.to_string());
            }
        }
    }
}

fn vecf(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let file = GgufFile::open(&args[1]).unwrap();
    let dir = PathBuf::from(&args[2]);
    let read_ids = |name: &str| -> Vec<u32> {
        std::fs::read_to_string(dir.join(name))
            .unwrap()
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect()
    };
    let prompt = read_ids("prompt.txt");
    let greedy = read_ids("tokens.txt");

    let dev = Device::Cpu;
    let cfg = ModelConfig::from_gguf(file.metadata()).unwrap();
    let w = GgufWeights::new(&file, &dev);
    let (h, d, nh, nkv) = (cfg.hidden_size, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads);
    let eps = cfg.rms_norm_eps;
    let emb = vecf(
        &w.qtensor("token_embd.weight", &[cfg.vocab_size, h])
            .unwrap()
            .dequantize(&dev)
            .unwrap(),
    );
    let lm_head = if w.contains("output.weight") {
        Linear::load(&w, "output", cfg.vocab_size, h).unwrap()
    } else {
        Linear::ggml(
            std::sync::Arc::new(
                w.qtensor("token_embd.weight", &[cfg.vocab_size, h])
                    .unwrap(),
            ),
            Weights::kernels(&w),
        )
        .unwrap()
    };
    let norm_w = |name: &str, n: usize| vecf(&w.tensor(name, &[n]).unwrap());
    let lin = |name: &str, o: usize, i: usize| {
        Linear::load(&w, name.strip_suffix(".weight").unwrap(), o, i).unwrap()
    };
    let norm = |x: &[f32], g: &[f32]| {
        let mut y = vec![0f32; x.len()];
        ggml_f32::rms_norm(x, g, eps, &mut y);
        y
    };
    // Matmuls through the CPU backend (its cache is unused here).
    let kv = KvGeometry {
        n_layers: 1,
        num_blocks: 1,
        block_size: 1,
        n_kv_heads: 1,
        head_dim: 1,
    };
    let backend = std::cell::RefCell::new(CpuBackend::new(kv, candle_core::DType::F32).unwrap());
    let apply = |l: &Linear, x: &[f32], _n_in: usize| {
        let mut out = Vec::new();
        backend
            .borrow_mut()
            .matmul(&x.to_vec(), l, &mut out)
            .unwrap();
        out
    };
    let mut kcache: Vec<Vec<Vec<f32>>> = vec![vec![Vec::new(); nkv]; cfg.n_layers];
    let mut vcache: Vec<Vec<Vec<f32>>> = vec![vec![Vec::new(); nkv]; cfg.n_layers];

    let mut pos = 0;
    let mut input = prompt.clone();
    for pass in 0..greedy.len() {
        println!("pass {pass} ({} tokens at {pos})", input.len());
        let mut dump = Dump::new(&dir.join(pass.to_string()));
        let n = input.len();
        let mut x: Vec<f32> = input
            .iter()
            .flat_map(|&t| emb[t as usize * h..(t as usize + 1) * h].to_vec())
            .collect();
        if let Some(s) = cfg.embedding_scale {
            x.iter_mut().for_each(|v| *v *= s);
        }
        dump.cmp("inp_scaled-SCALE", &x);
        for l in 0..cfg.n_layers {
            let p = format!("blk.{l}");
            let la = &cfg.layers[l];
            let rope = Rope::new(cfg.rope_style, cfg.rope_dim, la.rope_base);
            let positions: Vec<usize> = (pos..pos + n).collect();
            let (cos, sin) = rope.raw_tables(&positions);
            let hn = norm(&x, &norm_w(&format!("{p}.attn_norm.weight"), h));
            dump.cmp(&format!("attn_norm-{l}-MUL"), &hn);
            let mut q = apply(&lin(&format!("{p}.attn_q.weight"), nh * d, h), &hn, h);
            let mut k = apply(&lin(&format!("{p}.attn_k.weight"), nkv * d, h), &hn, h);
            let v = apply(&lin(&format!("{p}.attn_v.weight"), nkv * d, h), &hn, h);
            dump.cmp(&format!("Qcur-{l}-MUL_MAT"), &q);
            dump.cmp(&format!("Kcur-{l}-MUL_MAT"), &k);
            dump.cmp(&format!("Vcur-{l}-MUL_MAT"), &v);
            if cfg.qk_norm {
                q = norm(&q, &norm_w(&format!("{p}.attn_q_norm.weight"), d));
                k = norm(&k, &norm_w(&format!("{p}.attn_k_norm.weight"), d));
                dump.cmp(&format!("Qcur_normed-{l}-MUL"), &q);
                dump.cmp(&format!("Kcur_normed-{l}-MUL"), &k);
            }
            let neox = cfg.rope_style == RopeStyle::Halves;
            ggml_f32::rope(&mut q, d, cfg.rope_dim, neox, &cos, &sin);
            ggml_f32::rope(&mut k, d, cfg.rope_dim, neox, &cos, &sin);
            dump.cmp(&format!("Qcur-{l}-ROPE"), &q);
            dump.cmp(&format!("Kcur-{l}-ROPE"), &k);
            for t in 0..n {
                for kh in 0..nkv {
                    let at = (t * nkv + kh) * d;
                    kcache[l][kh].extend_from_slice(&k[at..at + d]);
                    vcache[l][kh].extend_from_slice(&v[at..at + d]);
                }
            }
            let kv_len = pos + n;
            let kall: Vec<f32> = kcache[l].concat();
            let vall: Vec<f32> = vcache[l].concat();
            let mut att = vec![0f32; n * nh * d];
            let shape = AttnShape {
                len: n,
                n_heads: nh,
                n_kv_heads: nkv,
                head_dim: d,
                kv_len,
                start_pos: pos,
                window: la.sliding_window,
            };
            attention(
                shape,
                (cfg.attention_scale, cfg.attn_logit_softcap),
                &q,
                &kall,
                &vall,
                &mut att,
            );
            dump.cmp(&format!("kqv_out-{l}-CONT"), &att);
            let mut o = apply(
                &lin(&format!("{p}.attn_output.weight"), h, nh * d),
                &att,
                nh * d,
            );
            dump.cmp(&format!("attn_out-{l}-MUL_MAT"), &o);
            if l + 1 == cfg.n_layers {
                // llama.cpp keeps only the output row (the last token) from
                // here on in the last layer, so its FFN runs on one row: the
                // K-quant kernels' float order depends on the row count.
                o = o[o.len() - h..].to_vec();
                x = x[x.len() - h..].to_vec();
            }
            if cfg.post_norms {
                o = norm(&o, &norm_w(&format!("{p}.post_attention_norm.weight"), h));
                dump.cmp(&format!("attn_post_norm-{l}-MUL"), &o);
            }
            for (a, b) in x.iter_mut().zip(&o) {
                *a += b;
            }
            dump.cmp(&format!("ffn_inp-{l}-ADD"), &x);
            dump.cmp(&format!("sa_out-{l}-ADD"), &x);
            let hn = norm(&x, &norm_w(&format!("{p}.ffn_norm.weight"), h));
            dump.cmp(&format!("ffn_norm-{l}-MUL"), &hn);
            let i = cfg.intermediate_size;
            let gate = apply(&lin(&format!("{p}.ffn_gate.weight"), i, h), &hn, h);
            let up = apply(&lin(&format!("{p}.ffn_up.weight"), i, h), &hn, h);
            dump.cmp(&format!("ffn_gate-{l}-MUL_MAT"), &gate);
            dump.cmp(&format!("ffn_up-{l}-MUL_MAT"), &up);
            let mut act = vec![0f32; gate.len()];
            for ((g, u), a) in gate
                .chunks_exact(i)
                .zip(up.chunks_exact(i))
                .zip(act.chunks_exact_mut(i))
            {
                match cfg.activation {
                    Activation::Silu => ggml_f32::swiglu_row(g, u, a),
                    Activation::GeluTanh => ggml_f32::geglu_row(g, u, a),
                }
            }
            dump.cmp(&format!("ffn_swiglu-{l}-SWIGLU"), &act);
            dump.cmp(&format!("ffn_geglu-{l}-GEGLU"), &act);
            let mut f = apply(&lin(&format!("{p}.ffn_down.weight"), h, i), &act, i);
            dump.cmp(&format!("ffn_out-{l}-MUL_MAT"), &f);
            if cfg.post_norms {
                f = norm(&f, &norm_w(&format!("{p}.post_ffw_norm.weight"), h));
                dump.cmp(&format!("ffn_post_norm-{l}-MUL"), &f);
            }
            for (a, b) in x.iter_mut().zip(&f) {
                *a += b;
            }
            dump.cmp(&format!("l_out-{l}-ADD"), &x);
        }
        let last = x[x.len() - h..].to_vec();
        let hn = norm(&last, &norm_w("output_norm.weight", h));
        dump.cmp("result_norm-MUL", &hn);
        let logits = apply(&lm_head, &hn, h);
        dump.cmp("result_output-MUL_MAT", &logits);
        println!("first divergence: {:?}", dump.first_bad);
        pos += n;
        if pass < greedy.len() {
            input = vec![greedy[pass]];
        }
    }
}
