//! `hf_to_gguf` against llama.cpp's convert_hf_to_gguf.py: for each tiny
//! fixture folder the script converted (tests/fixtures/tiny-models/gguf,
//! made by scripts/tiny-models), the same file byte for byte; where not, the
//! failure names the first metadata key or tensor that differs.

mod common;
use common::copy_folder;

use std::path::{Path, PathBuf};

use mlxr_convert::{hf_to_gguf, ConvertError, HfToGgufOptions, OutType};
use mlxr_formats::gguf::{GgmlType, GgufFile};

fn tiny(name: &str) -> PathBuf {
    mlxr_testkit::fixture_path(&format!("tiny-models/{name}"))
}

fn options(out_type: OutType) -> HfToGgufOptions {
    // The fixtures' tokenizer is freshly trained: llama.cpp's converter does
    // not know its hash either; scripts/tiny-models/convert-gguf.py names it qwen2.
    HfToGgufOptions {
        out_type,
        tokenizer_pre: Some("qwen2".into()),
    }
}

fn convert(folder: &Path, out: &Path, out_type: OutType) -> Result<(), ConvertError> {
    hf_to_gguf(folder, out, &options(out_type), |_| true).map(|_| ())
}

/// The first difference between two GGUF files, in words.
fn first_difference(ours: &Path, theirs: &Path) -> Option<String> {
    let a = GgufFile::open(ours).unwrap();
    let b = GgufFile::open(theirs).unwrap();
    let ka: Vec<_> = a.metadata().iter().collect();
    let kb: Vec<_> = b.metadata().iter().collect();
    for i in 0..ka.len().max(kb.len()) {
        if ka.get(i) != kb.get(i) {
            return Some(format!(
                "metadata #{i}: ours {:?}, script's {:?}",
                ka.get(i).map(|k| k.0),
                kb.get(i).map(|k| k.0)
            ));
        }
    }
    for i in 0..a.tensors().len().max(b.tensors().len()) {
        let (ta, tb) = (a.tensors().get(i), b.tensors().get(i));
        match (ta, tb) {
            (Some(x), Some(y)) => {
                if x.name != y.name || x.dims != y.dims || x.ggml_type != y.ggml_type {
                    return Some(format!(
                        "tensor #{i}: ours {} {:?} {}, script's {} {:?} {}",
                        x.name, x.dims, x.ggml_type, y.name, y.dims, y.ggml_type
                    ));
                }
                if a.tensor_data(x).unwrap() != b.tensor_data(y).unwrap() {
                    return Some(format!("tensor {}: data differs", x.name));
                }
            }
            _ => {
                return Some(format!(
                    "tensor count: ours {}, script's {}",
                    a.tensors().len(),
                    b.tensors().len()
                ))
            }
        }
    }
    (std::fs::read(ours).unwrap() != std::fs::read(theirs).unwrap())
        .then(|| "layout (offsets / padding) differs".to_string())
}

#[test]
fn f32_conversions_are_byte_identical_to_convert_hf_to_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (folder, reference) in [
        ("llama", "llama.f32.gguf"),
        ("mistral", "mistral.f32.gguf"),
        ("qwen2", "qwen2.f32.gguf"),
        ("qwen3", "qwen3.f32.gguf"),
        ("phi3", "phi3.f32.gguf"),
        ("gemma2-gguf", "gemma2-gguf.f32.gguf"),
    ] {
        let out = dir.path().join(reference);
        convert(&tiny(folder), &out, OutType::F32).unwrap_or_else(|e| panic!("{folder}: {e}"));
        let theirs = tiny(&format!("gguf/{reference}"));
        if let Some(d) = first_difference(&out, &theirs) {
            failures.push(format!("{folder}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn other_out_types_keep_the_values_within_their_rounding() {
    let dir = tempfile::tempdir().unwrap();
    let reference = GgufFile::open(tiny("gguf/llama.f32.gguf")).unwrap();
    for (out_type, ty, tolerance) in [
        (OutType::F16, GgmlType::F16, 1e-3f32),
        (OutType::BF16, GgmlType::BF16, 8e-3),
        (OutType::Q8_0, GgmlType::Q8_0, 1.2e-2),
    ] {
        let out = dir.path().join(format!("{ty}.gguf"));
        convert(&tiny("llama"), &out, out_type).unwrap();
        let file = GgufFile::open(&out).unwrap();
        let ftype = file.metadata().get_u32("general.file_type").unwrap();
        assert_eq!(
            ftype,
            match ty {
                GgmlType::F16 => 1,
                GgmlType::BF16 => 32,
                _ => 7,
            }
        );
        for (t, r) in file.tensors().iter().zip(reference.tensors()) {
            assert_eq!(t.name, r.name);
            let expected_ty = if t.dims.len() == 1 { GgmlType::F32 } else { ty };
            assert_eq!(t.ggml_type, expected_ty, "{}", t.name);
            let n = t.n_elements() as usize;
            let ours =
                mlxr_quantize::dequantize(t.ggml_type, file.tensor_data(t).unwrap(), n).unwrap();
            let theirs =
                mlxr_quantize::dequantize(r.ggml_type, reference.tensor_data(r).unwrap(), n)
                    .unwrap();
            let scale = theirs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = ours
                .iter()
                .zip(&theirs)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst <= tolerance * scale.max(1.0),
                "{ty} {}: {worst} vs scale {scale}",
                t.name
            );
        }
    }
}

#[test]
fn auto_picks_the_stored_half_type() {
    let dir = tempfile::tempdir().unwrap();
    for (folder, expected) in [
        ("mistral", OutType::BF16),
        ("qwen2", OutType::F16),
        ("llama", OutType::F16),
    ] {
        let out = dir.path().join(format!("{folder}.gguf"));
        let summary = hf_to_gguf(&tiny(folder), &out, &options(OutType::Auto), |_| true).unwrap();
        assert_eq!(summary.out_type, expected, "{folder}");
    }
    // Lossless: the weights' own half type, else F32 (llama is stored as F32).
    for (folder, expected) in [
        ("mistral", OutType::BF16),
        ("qwen2", OutType::F16),
        ("llama", OutType::F32),
    ] {
        let out = dir.path().join(format!("{folder}-lossless.gguf"));
        let summary =
            hf_to_gguf(&tiny(folder), &out, &options(OutType::Lossless), |_| true).unwrap();
        assert_eq!(summary.out_type, expected, "{folder}");
    }
}

fn error_of(folder: &Path, out: &Path) -> String {
    let e = convert(folder, out, OutType::F32).unwrap_err().to_string();
    assert!(!out.exists(), "a failed run left {}", out.display());
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    e
}

#[test]
fn malformed_folders_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out/m.gguf");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let case = |name: &str, edit: &dyn Fn(&Path)| {
        let folder = dir.path().join(name);
        copy_folder(&tiny("llama"), &folder);
        edit(&folder);
        error_of(&folder, &out)
    };

    let e = case("no-config", &|f| {
        std::fs::remove_file(f.join("config.json")).unwrap()
    });
    assert!(e.contains("no config.json"), "{e}");

    let e = case("unknown-arch", &|f| {
        let c = std::fs::read_to_string(f.join("config.json")).unwrap();
        std::fs::write(
            f.join("config.json"),
            c.replace("LlamaForCausalLM", "FancyForCausalLM"),
        )
        .unwrap();
    });
    assert!(
        e.contains("FancyForCausalLM is not supported") && e.contains("Qwen2ForCausalLM"),
        "{e}"
    );

    let e = case("bad-header", &|f| {
        let mut bytes = std::fs::read(f.join("model.safetensors")).unwrap();
        bytes[8] = b'[';
        std::fs::write(f.join("model.safetensors"), bytes).unwrap();
    });
    assert!(e.contains("not a valid safetensors file"), "{e}");

    let e = case("truncated", &|f| {
        let bytes = std::fs::read(f.join("model.safetensors")).unwrap();
        std::fs::write(f.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    });
    assert!(e.contains("not a valid safetensors file"), "{e}");

    let e = case("no-weights", &|f| {
        std::fs::remove_file(f.join("model.safetensors")).unwrap()
    });
    assert!(e.contains("no *.safetensors"), "{e}");

    let e = case("no-tokenizer", &|f| {
        std::fs::remove_file(f.join("tokenizer.json")).unwrap()
    });
    assert!(e.contains("no tokenizer.json"), "{e}");

    // One layer too few tensors: the config says 3 layers.
    let e = case("missing-layer", &|f| {
        let c = std::fs::read_to_string(f.join("config.json")).unwrap();
        std::fs::write(
            f.join("config.json"),
            c.replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3"),
        )
        .unwrap();
    });
    assert!(
        e.contains("lacks") && e.contains("blk.2.attn_q.weight"),
        "{e}"
    );

    // A shard the index lists is gone.
    let folder = dir.path().join("qwen2-missing-shard");
    copy_folder(&tiny("qwen2"), &folder);
    let shard = std::fs::read_dir(&folder)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("model-00002"))
        .unwrap();
    std::fs::remove_file(folder.join(&shard)).unwrap();
    let e = error_of(&folder, &out);
    assert!(e.contains(&shard) && e.contains("missing"), "{e}");

    // Without a pre-tokenizer name, an unknown tokenizer is refused with its hash.
    let e = hf_to_gguf(
        &tiny("llama"),
        &out,
        &HfToGgufOptions {
            out_type: OutType::F32,
            tokenizer_pre: None,
        },
        |_| true,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--tokenizer-pre")
            && e.contains("dcd762b197237b4a2d3dd83ca4b8f62b5d46cc243ac16f79b97de11231008986"),
        "{e}"
    );
}

/// Llama 3 RoPE scaling: no scaling keys, a `rope_freqs.weight` of one factor
/// per rotated pair first (1 for short wavelengths, `factor` for long ones, a
/// blend between), everything else as without it.
#[test]
fn llama3_rope_scaling_becomes_rope_freqs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("llama");
    copy_folder(&tiny("llama"), &folder);
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("config.json")).unwrap()).unwrap();
    let scaling = serde_json::json!({
        "rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64,
    });
    config["rope_parameters"] = scaling;
    std::fs::write(folder.join("config.json"), config.to_string()).unwrap();
    let out = dir.path().join("llama3.gguf");
    convert(&folder, &out, OutType::F32).unwrap();
    let ours = GgufFile::open(&out).unwrap();
    let theirs = GgufFile::open(tiny("gguf/llama.f32.gguf")).unwrap();
    let meta = |f: &GgufFile| {
        f.metadata()
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(meta(&ours), meta(&theirs));
    assert_eq!(ours.tensors()[0].name, "rope_freqs.weight");
    assert_eq!(ours.tensors().len(), theirs.tensors().len() + 1);
    for (a, b) in ours.tensors()[1..].iter().zip(theirs.tensors()) {
        assert_eq!(a.name, b.name);
        assert!(
            ours.tensor_data(a).unwrap() == theirs.tensor_data(b).unwrap(),
            "{}",
            a.name
        );
    }
    let factors: Vec<f32> = ours
        .tensor_data(&ours.tensors()[0])
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(factors.len(), 16);
    let (mut ones, mut full, mut blended) = (0, 0, 0);
    for (k, f) in factors.iter().enumerate() {
        let wavelen = std::f64::consts::TAU * 500f64.powf(2.0 * k as f64 / 32.0);
        let want = if wavelen < 16.0 {
            ones += 1;
            1.0
        } else if wavelen > 64.0 {
            full += 1;
            8.0
        } else {
            blended += 1;
            let smooth = (64.0 / wavelen - 1.0) / 3.0;
            1.0 / ((1.0 - smooth) / 8.0 + smooth)
        };
        assert!(
            (f64::from(*f) - want).abs() < 1e-5 * want,
            "pair {k}: {f} vs {want}"
        );
    }
    assert!(
        ones > 0 && full > 0 && blended > 0,
        "{ones} {full} {blended}"
    );
}
