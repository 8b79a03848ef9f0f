//! `mlxr quantize FOLDER OUT --type qB --group-size G` driven as a user
//! drives it: the folder written holds the tensors mlx_lm.convert -q writes
//! (tests/fixtures/mlx-quantize/reference.json, made by
//! scripts/fixtures/mlx-quantize-reference.py), and bad input is a one-line
//! error that leaves nothing behind.

mod common;
use common::assert_one_line_error;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

fn mlxr(args: &[&str], paths: &[&Path]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mlxr"));
    cmd.args(&args[..1]).args(paths).args(&args[1..]);
    cmd.output().unwrap()
}

fn tiny(name: &str) -> PathBuf {
    mlxr_testkit::fixture_path(&format!("tiny-models/{name}"))
}

#[test]
fn writes_the_folder_mlx_lm_writes() {
    let reference: serde_json::Value = serde_json::from_slice(
        &std::fs::read(mlxr_testkit::fixture_path("mlx-quantize/reference.json")).unwrap(),
    )
    .unwrap();
    let case = reference["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["model"] == "mistral" && c["bits"] == 5 && c["group_size"] == 32)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mistral-5bit");
    let run = mlxr(
        &["quantize", "--type", "q5", "--group-size", "32"],
        &[&tiny("mistral"), &out],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stderr).contains("MLX affine 5-bit, group 32"));
    let bytes = std::fs::read(out.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let expected = case["tensors"].as_object().unwrap();
    assert_eq!(st.len(), expected.len());
    for (name, view) in st.tensors() {
        assert_eq!(
            format!("{:x}", Sha256::digest(view.data())),
            expected[&name]["sha256"].as_str().unwrap(),
            "{name}"
        );
    }
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(config, case["config"]);

    // OUT exists: refused without --force, replaced with it.
    let again = mlxr(&["quantize", "--type", "q4"], &[&tiny("mistral"), &out]);
    assert_one_line_error(&again, "--force");
    let forced = mlxr(
        &["quantize", "--type", "q4", "--force"],
        &[&tiny("mistral"), &out],
    );
    assert!(forced.status.success());
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        config["quantization"],
        serde_json::json!({"group_size": 64, "bits": 4, "mode": "affine"})
    );
}

#[test]
fn bad_input_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cases: Vec<(Vec<&str>, PathBuf, &str)> = vec![
        (
            vec!["quantize", "--type", "q7"],
            tiny("llama"),
            "2, 3, 4, 5, 6 or 8 bits",
        ),
        (
            vec!["quantize", "--type", "q4", "--group-size", "48"],
            tiny("llama"),
            "group size 32, 64 or 128",
        ),
        (
            vec!["quantize", "--type", "q4"],
            tiny("gguf/llama.f32.gguf"),
            "not a GGUF file",
        ),
        (
            vec!["quantize", "--type", "Q4_K_M", "--group-size", "64"],
            tiny("llama"),
            "--group-size is for MLX output",
        ),
        (
            vec!["quantize", "--type", "q4"],
            tiny("llama-mlx-q4-g64"),
            "already quantized",
        ),
    ];
    for (args, input, needle) in cases {
        assert_one_line_error(&mlxr(&args, &[&input, &out]), needle);
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a failed run left something"
    );
}
