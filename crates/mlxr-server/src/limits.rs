//! Every bound on the work one request may ask for, in one place. A request
//! past a bound is answered 400 with a message naming the field and the
//! limit (see [`over`]).
//!
//! Bounds that come from the loaded model are checked by the engine when
//! the request meets it: the context size (prompt plus `max_tokens`, or
//! `num_ctx` when smaller) and the vocabulary (prompt token ids and
//! `logit_bias` keys). Chat templates carry their own bounds
//! ([`mlxr_template::MAX_SOURCE_BYTES`], [`mlxr_template::FUEL`],
//! [`mlxr_template::MAX_RENDERED_BYTES`]).

use std::time::Duration;

use crate::error::ApiError;

/// `logprobs` on `/v1/completions` (OpenAI's cap).
pub const MAX_COMPLETION_LOGPROBS: usize = 5;
/// `top_logprobs` on chat (OpenAI's cap), in both APIs.
pub const MAX_TOP_LOGPROBS: usize = 20;
/// `max_tokens`, `max_completion_tokens`, `num_predict`: a hard cap before
/// the model's context (which the engine checks) is even known.
pub const MAX_TOKENS: usize = 1 << 20;
/// Ollama's `num_ctx`. Values above the model's context are lowered to it.
pub const MAX_NUM_CTX: usize = 1 << 20;
/// Stop strings per request, and the longest one in bytes.
pub const MAX_STOP_STRINGS: usize = 16;
pub const MAX_STOP_BYTES: usize = 1024;
/// `logit_bias` entries, and the range of a bias (OpenAI's).
pub const MAX_LOGIT_BIAS_ENTRIES: usize = 1024;
pub const MAX_LOGIT_BIAS: f32 = 100.0;
/// The `grammar` extension's source (a Lark grammar or a regex); JSON
/// schemas are bounded by the body limit, and every grammar by llguidance's
/// own limits on its size and the work of each token.
pub const MAX_GRAMMAR_BYTES: usize = 256 << 10;
/// Tools offered in one request (OpenAI's cap).
pub const MAX_TOOLS: usize = 128;
/// Messages in one chat request, in both APIs.
pub const MAX_MESSAGES: usize = 4096;
/// Inputs of one embedding request (OpenAI's cap), and their total size.
pub const MAX_EMBED_INPUTS: usize = 2048;
pub const MAX_EMBED_INPUT_BYTES: usize = 8 << 20;
/// Token ids in a prompt given as ids (`prompt` on `/v1/completions`,
/// Ollama's `context`).
pub const MAX_PROMPT_TOKEN_IDS: usize = 1 << 20;
/// The longest `keep_alive` (request, `PATCH /api/mlxr/config`,
/// `--keep-alive`): 100 years. Negative values keep a model loaded for good.
pub const MAX_KEEP_ALIVE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// 400 unless `value <= max`.
pub fn at_most(field: &str, value: usize, max: usize) -> Result<(), ApiError> {
    if value > max {
        return Err(over(field, value, max));
    }
    Ok(())
}

/// The 400 for `field` = `value` above `max`.
pub fn over(field: &str, value: impl std::fmt::Display, max: usize) -> ApiError {
    ApiError::bad_request(format!("{field} is {value}; at most {max} is allowed"))
}

/// Count and length of stop strings.
pub fn check_stop(stop: &[String]) -> Result<(), ApiError> {
    at_most("stop (number of strings)", stop.len(), MAX_STOP_STRINGS)?;
    if let Some(s) = stop.iter().find(|s| s.len() > MAX_STOP_BYTES) {
        return Err(ApiError::bad_request(format!(
            "a stop string is {} bytes; at most {MAX_STOP_BYTES} bytes are allowed",
            s.len()
        )));
    }
    Ok(())
}

/// Number of entries and the range of each bias.
pub fn check_logit_bias(bias: &[(u32, f32)]) -> Result<(), ApiError> {
    at_most(
        "logit_bias (number of entries)",
        bias.len(),
        MAX_LOGIT_BIAS_ENTRIES,
    )?;
    if let Some((token, b)) = bias
        .iter()
        .find(|(_, b)| b.is_nan() || b.abs() > MAX_LOGIT_BIAS)
    {
        return Err(ApiError::bad_request(format!(
            "logit_bias for token {token} is {b}; a bias must be between -{MAX_LOGIT_BIAS} and \
             {MAX_LOGIT_BIAS}"
        )));
    }
    Ok(())
}

/// Number and total size of embedding inputs.
pub fn check_embed_inputs(texts: &[String]) -> Result<(), ApiError> {
    at_most("input (number of texts)", texts.len(), MAX_EMBED_INPUTS)?;
    let bytes: usize = texts.iter().map(String::len).sum();
    if bytes > MAX_EMBED_INPUT_BYTES {
        return Err(ApiError::bad_request(format!(
            "input is {bytes} bytes in all; at most {MAX_EMBED_INPUT_BYTES} bytes are allowed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_field_and_limit() {
        let e = at_most("n", 3, 2).unwrap_err();
        assert_eq!(e.message, "n is 3; at most 2 is allowed");
        assert!(at_most("n", 2, 2).is_ok());
        assert!(check_logit_bias(&[(1, 100.0), (2, -100.0)]).is_ok());
        for bad in [100.5, -101.0, f32::NAN, f32::NEG_INFINITY] {
            assert!(check_logit_bias(&[(1, bad)]).is_err(), "{bad}");
        }
        assert!(check_stop(&["x".repeat(MAX_STOP_BYTES)]).is_ok());
        assert!(check_stop(&["x".repeat(MAX_STOP_BYTES + 1)]).is_err());
    }
}
