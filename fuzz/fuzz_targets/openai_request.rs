//! An OpenAI request body as the server reads it (`parse_json`), then the
//! checks and conversion into an engine request that run before a model is
//! involved. Bad bodies are 400s, never panics; accepted requests are within
//! the limits.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_engine::GenerateRequest;
use mlxr_server::extract::parse_json;
use mlxr_server::limits;
use mlxr_server::openai::request::{ChatCompletionRequest, CompletionRequest};

fn check(req: &GenerateRequest) {
    req.sampling.validate().expect("accepted sampling is valid");
    assert!(req.max_tokens.is_none_or(|n| n <= limits::MAX_TOKENS));
    assert!(req.stop.len() <= limits::MAX_STOP_STRINGS);
    assert!(req.stop.iter().all(|s| !s.is_empty()));
    assert!(req.sampling.logit_bias.len() <= limits::MAX_LOGIT_BIAS_ENTRIES);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = parse_json::<ChatCompletionRequest>(data) {
        let _ = body.common.include_usage();
        match body.to_request() {
            Ok(req) => check(&req),
            Err(e) => assert_eq!(e.status.as_u16(), 400, "{e:?}"),
        }
    }
    if let Ok(body) = parse_json::<CompletionRequest>(data) {
        match body.to_request() {
            Ok(req) => check(&req),
            Err(e) => assert_eq!(e.status.as_u16(), 400, "{e:?}"),
        }
    }
});
