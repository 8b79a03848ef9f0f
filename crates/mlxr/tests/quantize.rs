//! `mlxr quantize` driven the way a user drives it: on the committed tiny
//! F16 model (output byte-identical to llama-quantize's, recorded by
//! scripts/fixtures/quantize-reference.py) and, where it is fetched, on
//! SmolLM2 (requantized, then generating).

mod common;
use common::assert_one_line_error;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mlxr_formats::GgufFile;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn mlxr() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mlxr"));
    cmd.env("RAYON_NUM_THREADS", "2");
    cmd
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mlxr-quantize/tests/fixtures")
        .join(name)
}

fn quantize(input: &Path, output: &Path, args: &[&str]) -> Output {
    mlxr()
        .arg("quantize")
        .arg(input)
        .arg(output)
        .args(args)
        .output()
        .unwrap()
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn quantizes_the_tiny_model_as_llama_quantize_does() {
    let reference: Value =
        serde_json::from_slice(&std::fs::read(fixture("llama-quantize-reference.json")).unwrap())
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tiny-Q4_K_M.gguf");
    let run = quantize(
        &fixture("tiny-llama-f16.gguf"),
        &out,
        &["--type", "q4_k_m", "--threads", "2"],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(String::from_utf8_lossy(&run.stderr).contains("wrote"));
    let file = GgufFile::open(&out).unwrap();
    assert_eq!(file.metadata().get_u32("general.file_type").unwrap(), 15);
    let expected = reference["types"]["Q4_K_M"]["tensors"].as_array().unwrap();
    assert_eq!(file.tensors().len(), expected.len());
    for (t, e) in file.tensors().iter().zip(expected) {
        assert_eq!(t.name, e["name"].as_str().unwrap());
        assert_eq!(
            t.ggml_type.name(),
            e["type"].as_str().unwrap(),
            "{}",
            t.name
        );
        let sha = format!("{:x}", Sha256::digest(file.raw_tensor_data(t).unwrap()));
        assert_eq!(sha, e["sha256"].as_str().unwrap(), "{}", t.name);
    }
    let file_sha = format!("{:x}", Sha256::digest(std::fs::read(&out).unwrap()));
    assert_eq!(
        file_sha,
        reference["types"]["Q4_K_M"]["file_sha256"]
            .as_str()
            .unwrap()
    );
    assert_eq!(entries(dir.path()), 1);
}

#[test]
fn bad_requests_are_one_line_errors_that_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("tiny-llama-f16.gguf");
    let out = dir.path().join("out.gguf");

    let run = quantize(&input, &out, &["--type", "Q4_K_X"]);
    assert_one_line_error(
        &run,
        "unknown quantization type \"Q4_K_X\"; valid types: Q4_0",
    );
    assert_eq!(entries(dir.path()), 0);

    let run = quantize(&dir.path().join("missing.gguf"), &out, &["--type", "Q8_0"]);
    assert_one_line_error(&run, "missing.gguf");
    assert_eq!(entries(dir.path()), 0);

    let not_gguf = dir.path().join("notes.txt");
    std::fs::write(&not_gguf, "hello").unwrap();
    let run = quantize(&not_gguf, &out, &["--type", "Q8_0"]);
    assert_one_line_error(&run, "not a GGUF file");
    assert!(!out.exists());

    // OUT exists: refused without --force, replaced with it.
    std::fs::write(&out, "keep me").unwrap();
    let run = quantize(&input, &out, &["--type", "Q8_0"]);
    assert_one_line_error(&run, "--force");
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    let run = quantize(&input, &out, &["--type", "Q8_0", "--force"]);
    assert!(run.status.success());
    assert_eq!(
        GgufFile::open(&out)
            .unwrap()
            .metadata()
            .get_u32("general.file_type")
            .unwrap(),
        7
    );

    // A quantized input needs --allow-requantize.
    let out2 = dir.path().join("q4.gguf");
    let run = quantize(&out, &out2, &["--type", "Q4_0"]);
    assert_one_line_error(&run, "--allow-requantize");
    assert!(!out2.exists());
    let run = quantize(&out, &out2, &["--type", "Q4_0", "--allow-requantize"]);
    assert!(run.status.success());
    assert_eq!(entries(dir.path()), 3);
}

#[test]
fn requantized_smollm2_still_generates() {
    // Missing: a note, or a failure under MLXR_REQUIRE_MODELS=1.
    let Some(model) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smollm2-q8_0.gguf");
    let run = quantize(&model, &out, &["--type", "Q8_0", "--allow-requantize"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let file = GgufFile::open(&out).unwrap();
    assert!(file
        .tensors()
        .iter()
        .all(|t| ["Q8_0", "F32"].contains(&t.ggml_type.name())));
    let gen = mlxr()
        .args(["generate", "-m"])
        .arg(&out)
        .args([
            "--raw",
            "-n",
            "8",
            "--temperature",
            "0",
            "The capital of France is",
        ])
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let text = String::from_utf8_lossy(&gen.stdout);
    assert!(text.contains("Paris"), "{text}");
}

/// Ctrl-C mid-run stops at the next tensor and leaves no file behind.
#[cfg(unix)]
#[test]
fn ctrl_c_leaves_nothing() {
    // Missing: a note, or a failure under MLXR_REQUIRE_MODELS=1.
    let Some(model) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smollm2-q6_k.gguf");
    let child = mlxr()
        .arg("quantize")
        .arg(&model)
        .arg(&out)
        .args(["--type", "Q6_K", "--allow-requantize", "--threads", "1"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the temporary file exists, i.e. the run is under way.
    let started = std::time::Instant::now();
    while entries(dir.path()) == 0 && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.success() {
        // The run finished before the signal arrived: nothing to check.
        mlxr_testkit::skip_note("quantize finished before Ctrl-C");
        return;
    }
    assert!(stderr.contains("cancelled"), "stderr: {stderr}");
    assert_eq!(entries(dir.path()), 0, "stderr: {stderr}");
}
