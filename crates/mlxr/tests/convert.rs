//! `mlxr convert` and `mlxr quantize FOLDER` driven the way a user drives
//! them, on the tiny Hugging Face fixtures: the GGUF written is the one
//! llama.cpp's convert_hf_to_gguf.py wrote (committed, scripts/tiny-models),
//! the quantized file the one llama-quantize writes from it
//! (scripts/fixtures/quantize-hf-reference.py); bad inputs are one-line errors.

mod common;
use common::assert_one_line_error;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

fn mlxr(args: &[&str], paths: &[&Path]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mlxr"));
    cmd.env("RAYON_NUM_THREADS", "2");
    cmd.args(&args[..1]).args(paths).args(&args[1..]);
    cmd.output().unwrap()
}

fn tiny(name: &str) -> PathBuf {
    mlxr_testkit::fixture_path(&format!("tiny-models/{name}"))
}

fn sha256(path: &Path) -> String {
    format!("{:x}", Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn converts_a_folder_as_convert_hf_to_gguf_does() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("qwen3.gguf");
    let run = mlxr(
        &["convert", "--outtype", "f32", "--tokenizer-pre", "qwen2"],
        &[&tiny("qwen3"), &out],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stderr).contains("wrote"));
    assert_eq!(sha256(&out), sha256(&tiny("gguf/qwen3.f32.gguf")));

    // OUT exists: refused without --force.
    let again = mlxr(
        &["convert", "--tokenizer-pre", "qwen2"],
        &[&tiny("qwen3"), &out],
    );
    assert_one_line_error(&again, "--force");
}

#[test]
fn quantizes_a_folder_as_convert_then_llama_quantize() {
    let fixture = mlxr_testkit::fixture_path(
        "../../crates/mlxr-convert/tests/fixtures/llama-quantize-hf.json",
    );
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("llama-q4_k_m.gguf");
    let run = mlxr(
        &[
            "quantize",
            "--type",
            "q4_k_m",
            "--tokenizer-pre",
            "qwen2",
            "--threads",
            "2",
        ],
        &[&tiny("llama"), &out],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        sha256(&out),
        reference["models"]["llama"]["types"]["Q4_K_M"]
            .as_str()
            .unwrap()
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "the intermediate file is left"
    );
}

#[test]
fn bad_inputs_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let gguf = tiny("gguf/llama.f32.gguf");
    let cases: Vec<(Vec<&str>, Vec<PathBuf>, &str)> = vec![
        (
            vec!["convert"],
            vec![empty.clone(), out.clone()],
            "no config.json",
        ),
        (
            vec!["quantize", "--type", "q8_0"],
            vec![empty.clone(), out.clone()],
            "no config.json",
        ),
        (
            vec!["convert"],
            vec![tiny("llama"), dir.path().join("folder")],
            "nothing to dequantize",
        ),
        (
            vec!["convert"],
            vec![dir.path().join("nothing"), out.clone()],
            "does not exist",
        ),
        (
            vec!["convert", "--outtype", "q4_k"],
            vec![tiny("llama"), out.clone()],
            "unknown --outtype",
        ),
        (
            vec!["convert", "--outtype", "q8_0"],
            vec![gguf.clone(), dir.path().join("hf")],
            "cannot be written to a Hugging Face folder",
        ),
        // --force never removes a folder that is not a model's.
        (
            vec!["convert", "--force"],
            vec![gguf.clone(), empty.clone()],
            "not a model folder",
        ),
        (
            vec!["convert"],
            vec![gguf.clone(), dir.path().join("x.gguf")],
            "mlxr quantize IN OUT --type T",
        ),
        // The fixtures' tokenizer is unknown to llama.cpp's converter: name it or fail.
        (
            vec!["convert"],
            vec![tiny("llama"), out.clone()],
            "--tokenizer-pre",
        ),
    ];
    for (args, paths, needle) in cases {
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        assert_one_line_error(&mlxr(&args, &paths), needle);
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("empty")],
        "a failed run left something"
    );
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

#[test]
fn a_gguf_converts_to_a_folder_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("phi3");
    let run = mlxr(
        &["convert", "--outtype", "f32"],
        &[&tiny("gguf/phi3.f32.gguf"), &folder],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        folder.join("tokenizer.json").is_file() && folder.join("chat_template.jinja").is_file()
    );
    let out = dir.path().join("phi3.gguf");
    let run = mlxr(
        &["convert", "--outtype", "f32", "--tokenizer-pre", "qwen2"],
        &[&folder, &out],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (a, b) = (
        mlxr_formats::GgufFile::open(tiny("gguf/phi3.f32.gguf")).unwrap(),
        mlxr_formats::GgufFile::open(&out).unwrap(),
    );
    for t in a.tensors() {
        assert!(
            a.tensor_data(t).unwrap() == b.tensor_data(b.tensor(&t.name).unwrap()).unwrap(),
            "{}",
            t.name
        );
    }
    // Again with --force: the model folder is replaced.
    let run = mlxr(
        &["convert", "--force", "--outtype", "bf16"],
        &[&tiny("gguf/phi3.f32.gguf"), &folder],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let config = std::fs::read_to_string(folder.join("config.json")).unwrap();
    assert!(config.contains("bfloat16"), "{config}");
}

#[test]
fn help_has_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .args(["convert", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in [
        "mlxr convert ./",
        "--outtype",
        "--tokenizer-pre",
        "Qwen3ForCausalLM",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .args(["quantize", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Hugging Face folder"));
}
