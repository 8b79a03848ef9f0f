//! all-MiniLM-L6-v2 against transformers' reference embeddings
//! (tests/fixtures/embeddings/all-minilm.json, scripts/embed-reference/).

use mlxr_embed::{EmbedError, EmbeddingModel, Pooling};
use serde::Deserialize;

use mlxr_testkit::MINILM as MODEL;
const MIN_COSINE: f64 = 0.9999;
const MAX_ABS_DIFF: f32 = 1e-4;
/// Padding is masked to exact zeros, so a text's vector may change only by
/// the summation order of a differently shaped matmul.
const MAX_BATCH_DIFF: f32 = 1e-6;

#[derive(Deserialize)]
struct Fixture {
    max_seq_length: usize,
    dimensions: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    tokens: usize,
    untruncated_tokens: usize,
    embedding: Vec<f32>,
}

fn fixture() -> Fixture {
    let path = mlxr_testkit::fixture_path("embeddings/all-minilm.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The model, or `None` (test skipped) when it was not fetched — unless
/// `MLXR_REQUIRE_MODELS=1`, as in CI.
fn load_model() -> Option<EmbeddingModel> {
    let dir = mlxr_testkit::model_path(mlxr_testkit::MINILM)?;
    Some(EmbeddingModel::load(&dir).unwrap())
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn model_settings_come_from_the_folder() {
    let Some(model) = load_model() else { return };
    let fixture = fixture();
    assert_eq!(model.name, MODEL);
    assert_eq!(model.dimensions(), fixture.dimensions);
    assert_eq!(model.max_tokens(), fixture.max_seq_length);
    assert_eq!(model.pooling(), Pooling::Mean);
    assert!(model.normalizes());
}

#[test]
fn one_at_a_time_matches_transformers() {
    let Some(model) = load_model() else { return };
    let mut worst = (1.0f64, 0.0f32);
    for (i, case) in fixture().cases.iter().enumerate() {
        let out = model.embed(&[&case.text], true).unwrap();
        assert_eq!(out.prompt_tokens, case.tokens, "case {i} {:?}", case.text);
        let vector = &out.vectors[0];
        let (cos, diff) = (
            cosine(vector, &case.embedding),
            max_abs_diff(vector, &case.embedding),
        );
        eprintln!(
            "case {i:2}: {:3} tokens, cosine {cos:.9}, max abs diff {diff:.2e}",
            case.tokens
        );
        assert!(cos >= MIN_COSINE, "case {i}: cosine {cos}");
        assert!(diff <= MAX_ABS_DIFF, "case {i}: max abs diff {diff}");
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "case {i}: norm {norm}");
        worst = (worst.0.min(cos), worst.1.max(diff));
    }
    eprintln!("worst: cosine {:.9}, max abs diff {:.2e}", worst.0, worst.1);
}

#[test]
fn batched_equals_one_at_a_time() {
    let Some(model) = load_model() else { return };
    let fixture = fixture();
    let texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    let batched = model.embed(&texts, true).unwrap();
    assert_eq!(batched.vectors.len(), texts.len());
    assert_eq!(
        batched.prompt_tokens,
        fixture.cases.iter().map(|c| c.tokens).sum::<usize>()
    );
    let mut worst = 0.0f32;
    for (i, text) in texts.iter().enumerate() {
        let alone = model.embed(&[text], true).unwrap();
        let diff = max_abs_diff(&batched.vectors[i], &alone.vectors[0]);
        assert!(
            diff <= MAX_BATCH_DIFF,
            "case {i}: batched differs by {diff}"
        );
        assert!(max_abs_diff(&batched.vectors[i], &fixture.cases[i].embedding) <= MAX_ABS_DIFF);
        worst = worst.max(diff);
    }
    eprintln!("batched vs alone: max abs diff {worst:.2e}");
}

#[test]
fn overlong_input_is_an_error_without_truncation() {
    let Some(model) = load_model() else { return };
    let fixture = fixture();
    let long = fixture
        .cases
        .iter()
        .find(|c| c.untruncated_tokens > fixture.max_seq_length)
        .expect("the fixture has an overlong text");
    let err = model.embed(&["short", &long.text], false).unwrap_err();
    match &err {
        EmbedError::InputTooLong {
            index,
            tokens,
            limit,
        } => {
            assert_eq!(*index, 1);
            assert_eq!(*tokens, long.untruncated_tokens);
            assert_eq!(*limit, fixture.max_seq_length);
        }
        other => panic!("expected InputTooLong, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("input 1") && message.contains("256"),
        "{message}"
    );
    // Within the limit, truncate=false changes nothing.
    let fits = model.embed(&["short"], false).unwrap();
    assert_eq!(fits.vectors, model.embed(&["short"], true).unwrap().vectors);
}

#[test]
fn no_texts_no_vectors() {
    let Some(model) = load_model() else { return };
    let out = model.embed(&[], true).unwrap();
    assert!(out.vectors.is_empty());
    assert_eq!(out.prompt_tokens, 0);
}
