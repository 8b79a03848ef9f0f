//! An Ollama `/api/generate` or `/api/chat` body as the server reads it,
//! then the checks run before a model is loaded and the engine settings
//! from the `options` (over no model parameters, and over typical ones).
//! The whole input is also tried as a model's parameters. Bad bodies are
//! 400s, never panics; accepted settings are within the limits.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_server::extract::parse_json;
use mlxr_server::limits;
use mlxr_server::ollama::options::{settings, Settings};
use mlxr_server::ollama::{ChatBody, GenerateBody};
use serde_json::{json, Map, Value};

fn check(result: Result<Settings, mlxr_server::error::ApiError>) {
    match result {
        Ok(s) => {
            s.sampling.validate().expect("accepted sampling is valid");
            assert!(s.num_ctx.is_none_or(|n| n <= limits::MAX_NUM_CTX));
            assert!(s.max_tokens.is_none_or(|n| n <= limits::MAX_TOKENS));
            assert!(s.stop.len() <= limits::MAX_STOP_STRINGS);
        }
        Err(e) => assert_eq!(e.status.as_u16(), 400, "{e:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let typical = json!({"temperature": 0.7, "stop": ["</s>"], "num_ctx": 4096});
    let typical = typical.as_object().unwrap();
    let none = Map::new();
    if let Ok(body) = parse_json::<GenerateBody>(data) {
        if body.check().is_ok() {
            check(body.settings(&none));
            check(body.settings(typical));
        }
    }
    if let Ok(body) = parse_json::<ChatBody>(data) {
        if body.check().is_ok() {
            check(body.settings(&none));
            check(body.settings(typical));
        }
    }
    if let Ok(Value::Object(params)) = serde_json::from_slice::<Value>(data) {
        check(settings(&params, None));
    }
});
