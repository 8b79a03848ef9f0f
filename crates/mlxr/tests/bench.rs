//! `mlxr bench` end to end on the real SmolLM2 model: tiny sizes, the JSON
//! shape and positive figures only (timings are not asserted).

use std::process::Command;

use serde_json::Value;

fn bench(extra: &[&str]) -> Option<String> {
    let model = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2)?;
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .env("RAYON_NUM_THREADS", "2")
        .arg("bench")
        .arg("-m")
        .arg(&model)
        .args(["-p", "16", "-n", "4", "-r", "1"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mlxr bench failed: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn json_has_one_object_per_test_with_positive_figures() {
    let Some(out) = bench(&["-t", "2", "-o", "json"]) else {
        return;
    };
    let tests: Vec<Value> = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["test"].as_str().unwrap()).collect();
    assert_eq!(names, ["pp16", "tg4"]);
    for (t, (n_prompt, n_gen)) in tests.iter().zip([(16, 0), (0, 4)]) {
        assert_eq!(t["n_prompt"], n_prompt, "{t}");
        assert_eq!(t["n_gen"], n_gen, "{t}");
        assert_eq!(t["n_threads"], 2, "{t}");
        assert_eq!(t["backend"], "CPU", "{t}");
        assert_eq!(t["model_type"], "llama 135M Q4_1", "{t}");
        assert!(t["model_size"].as_u64().unwrap() > 0, "{t}");
        assert!(t["model_n_params"].as_u64().unwrap() > 0, "{t}");
        assert!(t["avg_ns"].as_u64().unwrap() > 0, "{t}");
        assert!(t["avg_ts"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t["stddev_ts"].as_f64().unwrap() >= 0.0, "{t}");
        let samples = t["samples_ts"].as_array().unwrap();
        assert_eq!(samples.len(), 1, "{t}");
        assert!(samples[0].as_f64().unwrap() > 0.0, "{t}");
        assert_eq!(t["samples_ns"].as_array().unwrap().len(), 1, "{t}");
    }
}

#[test]
fn depths_run_every_test_after_a_cached_context() {
    let Some(out) = bench(&["-t", "2", "-d", "0,32", "-o", "json"]) else {
        return;
    };
    let tests: Vec<Value> = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["test"].as_str().unwrap()).collect();
    assert_eq!(names, ["pp16", "tg4", "pp16 @ d32", "tg4 @ d32"]);
    for (t, depth) in tests.iter().zip([0, 0, 32, 32]) {
        assert_eq!(t["n_depth"], depth, "{t}");
        assert!(t["avg_ts"].as_f64().unwrap() > 0.0, "{t}");
    }
}

#[test]
fn a_depth_off_the_kv_blocks_is_refused_with_a_reason() {
    let Some(model) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .env("RAYON_NUM_THREADS", "2")
        .arg("bench")
        .arg("-m")
        .arg(&model)
        .args(["-p", "16", "-n", "0", "-d", "8", "-r", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("whole number of KV blocks"), "{err}");
}

#[test]
fn parallel_sequences_report_llama_batched_bench_figures() {
    let Some(out) = bench(&["-t", "2", "--parallel", "1,3", "-o", "json"]) else {
        return;
    };
    let runs: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(runs.len(), 2, "{out}");
    for (r, pl) in runs.iter().zip([1, 3]) {
        assert_eq!(
            (&r["pp"], &r["tg"], &r["pl"]),
            (&16.into(), &4.into(), &pl.into())
        );
        assert_eq!(r["n_kv"], pl * 20, "{r}");
        for key in ["t_pp", "speed_pp", "t_tg", "speed_tg", "t", "speed"] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key}: {r}");
        }
        assert!(r["t"].as_f64() > r["t_pp"].as_f64(), "{r}");
    }
}

#[test]
fn markdown_table_mirrors_llama_bench() {
    let Some(out) = bench(&["-t", "1,2"]) else {
        return;
    };
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    for column in [
        "model", "size", "params", "backend", "threads", "test", "t/s",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("Q4_1")).collect();
    // pp16 and tg4 for each of the two thread counts (one child process each).
    assert_eq!(rows.len(), 4, "{out}");
    assert!(rows[0].contains("pp16") && rows[3].contains("tg4"), "{out}");
    assert!(rows.iter().all(|r| r.contains(" ± ")), "{out}");
}

/// A model drafting for itself: every draft stands; two thread counts, so
/// the flags also reach the child processes.
#[test]
fn speculative_generation_reports_the_drafts() {
    let Some(model) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    // p_min 0: draft however unsure (the prompt is a random token).
    let draft = [
        "--model-draft",
        model.to_str().unwrap(),
        "--draft-max",
        "4",
        "--draft-p-min",
        "0",
        "--draft-length",
        "max",
    ];
    let Some(out) = bench(&[&["-t", "1,2", "-o", "json"][..], &draft[..]].concat()) else {
        return;
    };
    let tests: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(tests.len(), 4, "{out}");
    for t in &tests {
        if t["n_gen"] == 0 {
            assert_eq!(t["draft_n"], 0, "{t}");
        } else {
            assert!(t["draft_n"].as_u64().unwrap() > 0, "{t}");
            assert_eq!(t["draft_n_accepted"], t["draft_n"], "{t}");
            assert!(t["avg_ts"].as_f64().unwrap() > 0.0, "{t}");
        }
    }
}

#[test]
fn help_has_examples() {
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Examples:") && text.contains("EngineHandle"),
        "{text}"
    );
}

#[test]
fn mlx_folders_are_benchmarked_too() {
    let folder = mlxr_testkit::fixture_path("tiny-models/qwen3-mlx-q4-g128");
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .env("RAYON_NUM_THREADS", "1")
        .arg("bench")
        .arg("-m")
        .arg(&folder)
        .args(["-p", "8", "-n", "2", "-r", "1", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tests: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tests.len(), 2);
    for t in &tests {
        assert!(
            t["model_type"].as_str().unwrap().starts_with("qwen3 "),
            "{t}"
        );
        assert!(
            t["model_type"].as_str().unwrap().ends_with(" MLX_Q4"),
            "{t}"
        );
        assert!(t["avg_ts"].as_f64().unwrap() > 0.0, "{t}");
    }
}
