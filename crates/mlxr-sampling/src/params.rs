use serde::{Deserialize, Serialize};

use crate::{SamplingError, TokenId};

/// How to pick the next token. Missing fields deserialize to the defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    /// Softmax temperature applied after truncation; 0 means greedy.
    /// Negative values are rejected by [`SamplingParams::validate`].
    pub temperature: f32,
    /// Keep the k most likely tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability sums to
    /// at least `top_p`; 1.0 disables.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; 0.0
    /// disables.
    pub min_p: f32,
    /// llama.cpp's repetition penalty on tokens in the window: positive
    /// logits are divided by it, negative ones multiplied; 1.0 disables.
    pub repeat_penalty: f32,
    /// How many of the most recent tokens (prompt and generated) the
    /// penalties look at; 0 disables them, `usize::MAX` means all.
    pub repeat_last_n: usize,
    /// OpenAI's presence penalty: subtracted once from every token that
    /// occurs in the window.
    pub presence_penalty: f32,
    /// OpenAI's frequency penalty: subtracted once per occurrence in the
    /// window.
    pub frequency_penalty: f32,
    /// Added to the logits of the given tokens first; `-inf` bans a token.
    pub logit_bias: Vec<(TokenId, f32)>,
    /// Seed of the random stream; `None` draws one from the OS.
    pub seed: Option<u64>,
    /// `Some(k)`: also report the k most likely alternatives' logprobs.
    pub logprobs: Option<usize>,
}

/// llama.cpp's defaults (also Ollama's, except that Ollama applies a
/// repetition penalty of 1.1; llama.cpp turned it off by default, and so do we).
impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            seed: None,
            logprobs: None,
        }
    }
}

impl SamplingParams {
    /// Always the most likely token, no truncation or penalties.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            ..Self::default()
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    pub fn validate(&self) -> Result<(), SamplingError> {
        let t = self.temperature;
        if !t.is_finite() || t < 0.0 {
            return Err(SamplingError::invalid(
                "temperature",
                format!("must be a finite number >= 0 (0 = greedy), got {t}"),
            ));
        }
        let p = self.top_p;
        if !(p > 0.0 && p <= 1.0) {
            return Err(SamplingError::invalid(
                "top_p",
                format!("must be in (0, 1] (1 = disabled), got {p}"),
            ));
        }
        let m = self.min_p;
        if !(0.0..=1.0).contains(&m) {
            return Err(SamplingError::invalid(
                "min_p",
                format!("must be in [0, 1] (0 = disabled), got {m}"),
            ));
        }
        let r = self.repeat_penalty;
        if !r.is_finite() || r <= 0.0 {
            return Err(SamplingError::invalid(
                "repeat_penalty",
                format!("must be a finite number > 0 (1 = disabled), got {r}"),
            ));
        }
        for (field, v) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if !v.is_finite() {
                return Err(SamplingError::invalid(
                    field,
                    format!("must be a finite number (0 = disabled), got {v}"),
                ));
            }
        }
        for &(token, bias) in &self.logit_bias {
            if bias.is_nan() || bias == f32::INFINITY {
                return Err(SamplingError::invalid(
                    "logit_bias",
                    format!("bias for token {token} must be a number or -inf, got {bias}"),
                ));
            }
        }
        Ok(())
    }

    /// Whether any of the repetition, presence or frequency penalties applies.
    pub(crate) fn has_penalties(&self) -> bool {
        self.repeat_last_n > 0
            && (self.repeat_penalty != 1.0
                || self.presence_penalty != 0.0
                || self.frequency_penalty != 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_llama_cpp() {
        let p = SamplingParams::default();
        p.validate().unwrap();
        assert_eq!(
            (p.temperature, p.top_k, p.top_p, p.min_p),
            (0.8, 40, 0.95, 0.05)
        );
        assert_eq!((p.repeat_penalty, p.repeat_last_n), (1.0, 64));
        assert!(!p.is_greedy());
        let g = SamplingParams::greedy();
        g.validate().unwrap();
        assert!(g.is_greedy());
    }

    #[test]
    fn invalid_values_name_the_field() {
        let cases: Vec<(&str, SamplingParams)> = vec![
            (
                "temperature",
                SamplingParams {
                    temperature: f32::NAN,
                    ..Default::default()
                },
            ),
            (
                "temperature",
                SamplingParams {
                    temperature: -0.5,
                    ..Default::default()
                },
            ),
            (
                "temperature",
                SamplingParams {
                    temperature: f32::INFINITY,
                    ..Default::default()
                },
            ),
            (
                "top_p",
                SamplingParams {
                    top_p: 0.0,
                    ..Default::default()
                },
            ),
            (
                "top_p",
                SamplingParams {
                    top_p: 1.5,
                    ..Default::default()
                },
            ),
            (
                "top_p",
                SamplingParams {
                    top_p: f32::NAN,
                    ..Default::default()
                },
            ),
            (
                "min_p",
                SamplingParams {
                    min_p: -0.1,
                    ..Default::default()
                },
            ),
            (
                "min_p",
                SamplingParams {
                    min_p: f32::NAN,
                    ..Default::default()
                },
            ),
            (
                "repeat_penalty",
                SamplingParams {
                    repeat_penalty: 0.0,
                    ..Default::default()
                },
            ),
            (
                "repeat_penalty",
                SamplingParams {
                    repeat_penalty: f32::NAN,
                    ..Default::default()
                },
            ),
            (
                "presence_penalty",
                SamplingParams {
                    presence_penalty: f32::NAN,
                    ..Default::default()
                },
            ),
            (
                "frequency_penalty",
                SamplingParams {
                    frequency_penalty: f32::INFINITY,
                    ..Default::default()
                },
            ),
            (
                "logit_bias",
                SamplingParams {
                    logit_bias: vec![(3, f32::NAN)],
                    ..Default::default()
                },
            ),
            (
                "logit_bias",
                SamplingParams {
                    logit_bias: vec![(3, f32::INFINITY)],
                    ..Default::default()
                },
            ),
        ];
        for (field, params) in cases {
            match params.validate() {
                Err(SamplingError::InvalidParam { field: got, .. }) => assert_eq!(got, field),
                Ok(()) => panic!("{field}: accepted {params:?}"),
            }
        }
        let banned = SamplingParams {
            logit_bias: vec![(3, f32::NEG_INFINITY)],
            ..Default::default()
        };
        banned.validate().unwrap();
    }

    #[test]
    fn partial_json_fills_defaults() {
        let p: SamplingParams = serde_json::from_str(r#"{"temperature": 0.2, "seed": 7}"#).unwrap();
        assert_eq!(p.temperature, 0.2);
        assert_eq!(p.seed, Some(7));
        assert_eq!(p.top_k, 40);
    }
}
