//! Ollama's `options` (and a model's default parameters, same names) to
//! engine settings. Unknown keys are ignored, as Ollama does; known keys
//! with the wrong type or out of bounds are a 400; the options listed in
//! [`IGNORED`] are accepted without effect, with a warning in the log.
//! Speculative decoding takes llama-server's keys (`speculative.type`,
//! `speculative.n_max`, `speculative.n_min`, `speculative.p_min`), here as
//! in OpenAI request bodies; a model's parameters may also name its draft
//! model (`speculative.model_draft`), which a request cannot.

use mlxr_engine::{SamplingParams, SpecOverrides};
use serde_json::{Map, Value};

use crate::catalog::MODEL_DRAFT_PARAMETER;
use crate::error::ApiError;
use crate::limits::{self, at_most};

/// Options Ollama clients send that have no effect here: hardware and
/// loading settings the engine chooses itself, and the samplers it does not
/// have (mirostat, typical, tail-free).
pub const IGNORED: &[&str] = &[
    "num_keep",
    "typical_p",
    "num_batch",
    "num_gpu",
    "main_gpu",
    "use_mmap",
    "num_thread",
    "numa",
    "low_vram",
    "f16_kv",
    "logits_all",
    "vocab_only",
    "use_mlock",
    "embedding_only",
    "tfs_z",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "penalize_newline",
    "draft_num_predict",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub sampling: SamplingParams,
    /// `None`: until the model stops or the context is full.
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    /// Per-request context cap (`num_ctx`).
    pub num_ctx: Option<usize>,
    pub speculation: SpecOverrides,
}

/// Ollama's defaults, then the model's parameters, then the request's options.
pub fn settings(
    model_params: &Map<String, Value>,
    options: Option<&Value>,
) -> Result<Settings, ApiError> {
    let mut s = Settings {
        sampling: SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.9,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            ..SamplingParams::default()
        },
        max_tokens: None,
        stop: Vec::new(),
        num_ctx: None,
        speculation: SpecOverrides::default(),
    };
    apply(&mut s, model_params)?;
    match options {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            if map.contains_key(MODEL_DRAFT_PARAMETER) {
                return Err(ApiError::bad_request(format!(
                    "{MODEL_DRAFT_PARAMETER} is not a request option: the draft model loads \
                     with the model (a model parameter: Modelfile PARAMETER or /api/create \
                     parameters; or mlxr serve --model-draft)"
                )));
            }
            apply(&mut s, map)?;
            let ignored: Vec<&str> = map
                .keys()
                .map(String::as_str)
                .filter(|k| IGNORED.contains(k))
                .collect();
            if !ignored.is_empty() {
                tracing::warn!(
                    options = %ignored.join(", "),
                    "options accepted but without effect here"
                );
            }
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "options must be an object, got {other}"
            )))
        }
    }
    s.sampling
        .validate()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    limits::check_stop(&s.stop)?;
    Ok(s)
}

fn apply(s: &mut Settings, map: &Map<String, Value>) -> Result<(), ApiError> {
    for (key, value) in map {
        let float = || {
            value
                .as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| wrong_type(key, "a number", value))
        };
        let int = || {
            value
                .as_i64()
                .ok_or_else(|| wrong_type(key, "an integer", value))
        };
        let sp = &mut s.sampling;
        match key.as_str() {
            "temperature" => sp.temperature = float()?,
            "top_k" => sp.top_k = int()?.max(0) as usize,
            "top_p" => sp.top_p = float()?,
            "min_p" => sp.min_p = float()?,
            "repeat_penalty" => sp.repeat_penalty = float()?,
            "presence_penalty" => sp.presence_penalty = float()?,
            "frequency_penalty" => sp.frequency_penalty = float()?,
            "repeat_last_n" => {
                sp.repeat_last_n = match int()? {
                    n if n < 0 => usize::MAX,
                    n => n as usize,
                }
            }
            "seed" => sp.seed = Some(int()?).filter(|&n| n >= 0).map(|n| n as u64),
            "num_predict" => s.max_tokens = num_predict(int()?)?,
            "num_ctx" => s.num_ctx = Some(num_ctx(int()?)?),
            "speculative.type" => {
                let kind = value
                    .as_str()
                    .ok_or_else(|| wrong_type(key, "a string", value))?;
                s.speculation.spec_type =
                    Some(kind.parse().map_err(|e: String| ApiError::bad_request(e))?);
            }
            "speculative.n_max" => s.speculation.n_max = Some(count(key, int()?)?),
            "speculative.n_min" => s.speculation.n_min = Some(count(key, int()?)?),
            "speculative.p_min" => s.speculation.p_min = Some(float()?),
            "speculative.ngram_min" => s.speculation.ngram_min = Some(count(key, int()?)?),
            "speculative.ngram_max" => s.speculation.ngram_max = Some(count(key, int()?)?),
            "speculative.draft_length" => {
                let length = value
                    .as_str()
                    .ok_or_else(|| wrong_type(key, "a string", value))?;
                s.speculation.draft_length = Some(length.parse().map_err(|e: String| {
                    ApiError::bad_request(format!("speculative.draft_length: {e}"))
                })?);
            }
            // Read when the model loads (`ModelSpec::model_draft`).
            MODEL_DRAFT_PARAMETER => {}
            "stop" => {
                s.stop = match value {
                    Value::String(one) => vec![one.clone()],
                    Value::Array(many) => many
                        .iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .ok_or_else(|| wrong_type(key, "strings", value))
                        })
                        .collect::<Result<_, _>>()?,
                    _ => return Err(wrong_type(key, "a string or a list of strings", value)),
                }
            }
            k if IGNORED.contains(&k) => {}
            k => tracing::warn!(option = k, "invalid option provided (ignored)"),
        }
    }
    Ok(())
}

/// Ollama's `num_predict`: -1 (no limit) and -2 (fill the context) both
/// run until the model stops or the context is full.
fn num_predict(n: i64) -> Result<Option<usize>, ApiError> {
    match n {
        -2 | -1 => Ok(None),
        n if n < 0 => Err(ApiError::bad_request(format!(
            "option 'num_predict' is {n}; give a number of tokens, or -1 for no limit"
        ))),
        n => {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            at_most("option 'num_predict'", n, limits::MAX_TOKENS)?;
            Ok(Some(n))
        }
    }
}

/// A number of tokens, at least 0.
fn count(key: &str, n: i64) -> Result<usize, ApiError> {
    usize::try_from(n)
        .map_err(|_| ApiError::bad_request(format!("option '{key}' is {n}; it must be at least 0")))
}

/// Ollama's `num_ctx`: at least 1; above the model's context it is lowered
/// to it.
fn num_ctx(n: i64) -> Result<usize, ApiError> {
    if n < 1 {
        return Err(ApiError::bad_request(format!(
            "option 'num_ctx' is {n}; it must be at least 1"
        )));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    at_most("option 'num_ctx'", n, limits::MAX_NUM_CTX)?;
    Ok(n)
}

fn wrong_type(key: &str, want: &str, got: &Value) -> ApiError {
    ApiError::bad_request(format!("option '{key}' must be {want}, got {got}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_model_parameters_then_options() {
        let params = json!({"temperature": 0.2, "stop": ["<|im_end|>"]});
        let s = settings(
            params.as_object().unwrap(),
            Some(&json!({"top_k": 5, "num_predict": 12, "seed": 42, "mirostat": 1, "whatever": true})),
        )
        .unwrap();
        assert_eq!(s.sampling.temperature, 0.2);
        assert_eq!(s.sampling.top_k, 5);
        assert_eq!(s.sampling.top_p, 0.9);
        assert_eq!(s.sampling.seed, Some(42));
        assert_eq!(s.max_tokens, Some(12));
        assert_eq!(s.stop, vec!["<|im_end|>"]);
        let s = settings(&Map::new(), Some(&json!({"num_predict": -1, "seed": -1}))).unwrap();
        assert_eq!((s.max_tokens, s.sampling.seed), (None, None));
        let s = settings(
            &Map::new(),
            Some(&json!({"num_predict": -2, "num_ctx": 64})),
        )
        .unwrap();
        assert_eq!((s.max_tokens, s.num_ctx), (None, Some(64)));
    }

    #[test]
    fn wrong_types_are_rejected() {
        for bad in [
            json!({"temperature": "hot"}),
            json!({"top_k": 1.5}),
            json!({"stop": 3}),
            json!([1]),
            json!({"num_predict": -3}),
            json!({"num_predict": limits::MAX_TOKENS + 1}),
            json!({"num_ctx": 0}),
            json!({"num_ctx": -5}),
            json!({"num_ctx": limits::MAX_NUM_CTX + 1}),
            json!({"stop": vec!["x"; limits::MAX_STOP_STRINGS + 1]}),
        ] {
            assert!(settings(&Map::new(), Some(&bad)).is_err(), "{bad}");
        }
        assert!(settings(&Map::new(), Some(&json!({"temperature": -1}))).is_err());
    }
}
