//! The `mlxr` binary driven the way a user drives it, on the real SmolLM2 model.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn mlxr() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mlxr"));
    cmd.env("RAYON_NUM_THREADS", "2");
    cmd
}

fn smollm2() -> Option<PathBuf> {
    mlxr_testkit::model_path(mlxr_testkit::SMOLLM2)
}

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/llamacpp/smollm2.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "mlxr failed: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_generate(model: &PathBuf, extra: &[&str], prompt: &str) -> Value {
    let out = mlxr()
        .arg("generate")
        .arg("-m")
        .arg(model)
        .args(["--raw", "--json"])
        .args(extra)
        .arg(prompt)
        .output()
        .unwrap();
    serde_json::from_str(&ok(out)).unwrap()
}

/// One-line error on stderr, non-zero exit, no backtrace.
fn assert_one_line_error(out: Output, needle: &str) {
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "stderr: {stderr}");
    assert!(stderr.contains(needle), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}

#[test]
fn help_shows_examples() {
    for sub in [
        &[][..],
        &["run"],
        &["generate"],
        &["tokenize"],
        &["quantize"],
    ] {
        let text = ok(mlxr().args(sub).arg("--help").output().unwrap());
        assert!(text.contains("Examples:"), "{sub:?} --help: {text}");
    }
}

#[test]
fn missing_and_non_gguf_files_are_one_line_errors() {
    let out = mlxr()
        .args(["generate", "-m", "/no/such/model.gguf", "hi"])
        .output()
        .unwrap();
    assert_one_line_error(out, "/no/such/model.gguf");

    let mut not_gguf = tempfile::NamedTempFile::new().unwrap();
    not_gguf
        .write_all(b"PK\x03\x04 this is a zip, not a model")
        .unwrap();
    for sub in ["generate", "run", "tokenize"] {
        let out = mlxr()
            .args([sub, "-m"])
            .arg(not_gguf.path())
            .arg("hi")
            .output()
            .unwrap();
        assert_one_line_error(out, "GGUF");
    }
}

#[test]
fn tokenize_matches_llamacpp() {
    let Some(model) = smollm2() else { return };
    let fx = fixture();
    for case in fx["tokenize"].as_array().unwrap().iter().take(8) {
        let text = case["text"].as_str().unwrap();
        let out = ok(mlxr()
            .arg("tokenize")
            .arg("-m")
            .arg(&model)
            .arg(text)
            .output()
            .unwrap());
        let ids: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(ids, case["ids"], "text {text:?}");
    }
    let out = ok(mlxr()
        .arg("tokenize")
        .arg("-m")
        .arg(&model)
        .args(["--pieces", "Hello world"])
        .output()
        .unwrap());
    let pieces: Value = serde_json::from_str(&out).unwrap();
    let text: String = pieces
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["piece"].as_str().unwrap())
        .collect();
    assert!(text.ends_with("Hello world"), "{pieces}");
}

#[test]
fn greedy_generate_json_matches_llamacpp() {
    let Some(model) = smollm2() else { return };
    let fx = fixture();
    let case = fx["generate"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "raw")
        .expect("a raw prompt in the fixture");
    // Compare while llama.cpp's choice is unambiguous.
    let gaps = case["top2_gap"].as_array().unwrap();
    let clear = gaps
        .iter()
        .take_while(|g| g.as_f64().unwrap() >= 0.05)
        .count()
        .min(16);
    assert!(clear > 0);
    let n = clear.to_string();
    let out = json_generate(
        &model,
        &["--temperature", "0", "-n", &n],
        case["prompt"].as_str().unwrap(),
    );
    let expected: Vec<Value> = case["ids"].as_array().unwrap()[..clear].to_vec();
    assert_eq!(out["tokens"].as_array().unwrap()[..clear], expected[..]);
    assert_eq!(out["prompt_tokens"], case["prompt_ids"]);
    assert_eq!(out["finish_reason"], "length");
    let t = &out["timings"];
    assert_eq!(t["predicted_n"], clear);
    assert_eq!(t["prompt_n"], case["prompt_ids"].as_array().unwrap().len());
    assert!(t["prompt_ms"].as_f64().unwrap() > 0.0 && t["predicted_ms"].as_f64().unwrap() > 0.0);
    assert!(!out["text"].as_str().unwrap().is_empty());
}

#[test]
fn seeded_sampling_is_reproducible() {
    let Some(model) = smollm2() else { return };
    let args = [
        "--temperature",
        "1.0",
        "--top-k",
        "0",
        "--top-p",
        "1",
        "--min-p",
        "0",
        "-n",
        "12",
    ];
    let run = |seed: &str| {
        let mut a = args.to_vec();
        a.extend(["--seed", seed]);
        json_generate(&model, &a, "Once upon a time")["tokens"].clone()
    };
    let first = run("7");
    assert_eq!(first, run("7"));
    let others: Vec<Value> = ["8", "9", "10"].iter().map(|s| run(s)).collect();
    assert!(
        others.iter().any(|o| *o != first),
        "different seeds all gave {first}"
    );
}

#[test]
fn stop_string_ends_the_reply_and_is_not_printed() {
    let Some(model) = smollm2() else { return };
    let prompt = "The capital of France is";
    let free = json_generate(&model, &["--temperature", "0", "-n", "16"], prompt);
    let text = free["text"].as_str().unwrap().to_string();
    // A stop string from the middle of the greedy text.
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(words.len() >= 3, "{text:?}");
    let stop = words[2];
    let cut = json_generate(
        &model,
        &["--temperature", "0", "-n", "16", "--stop", stop],
        prompt,
    );
    let cut_text = cut["text"].as_str().unwrap();
    assert_eq!(cut["finish_reason"], "stop");
    assert!(!cut_text.contains(stop), "{cut_text:?} contains {stop:?}");
    assert_eq!(cut_text, &text[..text.find(stop).unwrap()]);
}

#[test]
fn logprobs_report_top_alternatives() {
    let Some(model) = smollm2() else { return };
    let out = json_generate(
        &model,
        &["--temperature", "0", "-n", "4", "--logprobs", "3"],
        "Hello",
    );
    let lps = out["logprobs"].as_array().unwrap();
    assert_eq!(lps.len(), 4);
    for (entry, id) in lps.iter().zip(out["tokens"].as_array().unwrap()) {
        assert_eq!(&entry["id"], id);
        let lp = entry["logprob"].as_f64().unwrap();
        let top = entry["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        // Greedy: the chosen token is the most likely one.
        assert_eq!(top[0]["id"], *id);
        assert!((top[0]["logprob"].as_f64().unwrap() - lp).abs() < 1e-5);
        assert!(lp <= 0.0);
        let values: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
    }
}

/// `run` answers through the same engine path as `generate` (chat template,
/// greedy), whose ids are checked against llama.cpp above and in the engine tests.
#[test]
fn run_answers_one_prompt_like_generate() {
    let Some(model) = smollm2() else { return };
    let question = "Write a Python function that checks whether a number is prime.";
    let out = mlxr()
        .arg("run")
        .arg("-m")
        .arg(&model)
        .args(["--temperature", "0", "-n", "20", "--verbose", question])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let reply = ok(out);
    let generated = ok(mlxr()
        .arg("generate")
        .arg("-m")
        .arg(&model)
        .args(["--temperature", "0", "-n", "20", question])
        .output()
        .unwrap());
    assert!(reply.trim().len() > 10, "reply: {reply:?}");
    assert_eq!(reply, generated);
    assert!(stderr.contains("prompt eval rate:"), "stderr: {stderr}");
    assert!(stderr.contains("\neval rate:"), "stderr: {stderr}");
}

#[test]
fn interactive_chat_keeps_history_and_leaves_on_bye() {
    let Some(model) = smollm2() else { return };
    let mut child = mlxr()
        .arg("run")
        .arg("-m")
        .arg(&model)
        .args(["--temperature", "0", "-n", "12", "--verbose"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Hi, my name is Ada.\nWhat did I say my name was?\n/bye\nnever read\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "stderr: {stderr}");
    // Two replies; the second turn re-used the first turn's KV cache, so its
    // prompt eval covers only the new tokens, fewer than the whole history.
    let counts: Vec<usize> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("prompt eval count:"))
        .map(|l| l.trim().split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 2, "stderr: {stderr}");
    assert!(counts[1] < counts[0] + 12, "counts {counts:?}");
}

/// A model with a tensor type MLXR cannot run yet fails to load with a
/// one-line error naming the tensor and its type; its tokenizer still works.
#[test]
fn unsupported_tensor_type_is_named() {
    use mlxr_formats::gguf::writer::GgufWriter;
    use mlxr_formats::gguf::{GgmlType, MetadataArray, MetadataValue};

    let tokens: Vec<String> = ["<unk>", "<s>", "</s>", "a", "b"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let iq_bytes = (GgmlType::IQ2_XXS.type_size() * 256 / GgmlType::IQ2_XXS.block_size()) as usize;
    let file = GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("tokenizer.ggml.model", "llama")
        .kv(
            "tokenizer.ggml.tokens",
            MetadataValue::Array(MetadataArray::String(tokens)),
        )
        .kv(
            "tokenizer.ggml.scores",
            MetadataValue::Array(MetadataArray::F32(vec![0.0; 5])),
        )
        .kv(
            "tokenizer.ggml.token_type",
            MetadataValue::Array(MetadataArray::I32(vec![2, 3, 3, 1, 1])),
        )
        .kv("tokenizer.ggml.bos_token_id", 1u32)
        .kv("tokenizer.ggml.eos_token_id", 2u32)
        .tensor(
            "blk.0.attn_q.weight",
            &[256, 1],
            GgmlType::IQ2_XXS,
            vec![0u8; iq_bytes],
        )
        .build();
    let mut tmp = tempfile::NamedTempFile::new().unwrap();
    tmp.write_all(&file).unwrap();

    let out = mlxr()
        .args(["generate", "-m"])
        .arg(tmp.path())
        .arg("hi")
        .output()
        .unwrap();
    assert_one_line_error(out, "'blk.0.attn_q.weight' has type IQ2_XXS");

    let ids = ok(mlxr()
        .args(["tokenize", "-m"])
        .arg(tmp.path())
        .arg("ab")
        .output()
        .unwrap());
    let ids: Value = serde_json::from_str(&ids).unwrap();
    assert_eq!(ids[0], 1, "BOS first: {ids}");
}

#[test]
fn prompt_lookup_flags_change_speed_not_text() {
    let Some(model) = smollm2() else { return };
    let prompt = "Repeat twice: red, green, blue, cyan, magenta, yellow, black, white.";
    // Always 5 draft tokens where a match allows (the default, goodput,
    // drafts as the measured step costs say: checked for text below).
    let spec = [
        "--spec-type",
        "ngram",
        "--draft-max",
        "5",
        "--draft-length",
        "max",
    ];
    // The stop string ends the reply inside a run of accepted draft tokens
    // (SmolLM2 repeats "number is the sum of the two preceding ones", the
    // second time after "each").
    let stop = ["-n", "48", "--stop", "each number is the sum of"];
    for extra in [&["-n", "48"][..], &stop[..]] {
        let plain = json_generate(&model, &[&["--temperature", "0"], extra].concat(), prompt);
        let fast = json_generate(
            &model,
            &[&["--temperature", "0"], extra, &spec[..]].concat(),
            prompt,
        );
        assert_eq!(fast["text"], plain["text"], "{extra:?}");
        assert_eq!(fast["tokens"], plain["tokens"], "{extra:?}");
        assert_eq!(fast["finish_reason"], plain["finish_reason"]);
        if extra == stop {
            assert_eq!(fast["finish_reason"], "stop", "{}", fast["text"]);
        }
        let t = &fast["timings"];
        assert!(t["draft_n"].as_u64().unwrap() > 0, "{t}");
        assert!(t["draft_n_accepted"].as_u64().unwrap() <= t["draft_n"].as_u64().unwrap());
        assert_eq!(plain["timings"]["draft_n"], 0);
    }
    // A draft model (here the model itself: every draft stands).
    let with_draft = |extra: &[&str]| {
        let args = [
            "--temperature",
            "0",
            "-n",
            "48",
            "--model-draft",
            model.to_str().unwrap(),
        ];
        json_generate(&model, &[&args[..], extra].concat(), prompt)
    };
    let self_draft = with_draft(&["--draft-length", "max"]);
    let plain = json_generate(&model, &["--temperature", "0", "-n", "48"], prompt);
    assert_eq!(self_draft["tokens"], plain["tokens"]);
    // A draft model loaded and speculation turned off: nothing drafts.
    let off = with_draft(&["--spec-type", "none"]);
    assert_eq!(off["tokens"], plain["tokens"]);
    assert_eq!(off["timings"]["draft_n"], 0, "{}", off["timings"]);
    let goodput = json_generate(
        &model,
        &["--temperature", "0", "-n", "48", "--spec-type", "ngram"],
        prompt,
    );
    assert_eq!(goodput["tokens"], plain["tokens"]);
    let t = &self_draft["timings"];
    assert!(t["draft_n"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(t["draft_n_accepted"], t["draft_n"]);
    // Sampling with drafts: the same seed, the same text.
    let sampled = [
        &["--temperature", "1", "--seed", "3", "-n", "24"][..],
        &spec[..],
    ]
    .concat();
    assert_eq!(
        json_generate(&model, &sampled, prompt)["tokens"],
        json_generate(&model, &sampled, prompt)["tokens"]
    );
    for (flags, needle) in [
        (
            &["--spec-type", "ngram", "--draft-max", "40"][..],
            "n_max is 40",
        ),
        (&["--model-draft", "x.gguf"][..], "cannot read x.gguf"),
        (&["--spec-type", "draft"][..], "needs a draft model"),
        (
            &["--spec-type", "ngram", "--draft-length", "most"][..],
            "not a draft length",
        ),
        (
            &["--spec-type", "medusa"][..],
            "not a speculative decoding type",
        ),
    ] {
        let out = mlxr()
            .arg("generate")
            .arg("-m")
            .arg(&model)
            .args(flags)
            .arg("hi")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{flags:?}: {err}");
    }
}
