//! Distribution checks with seeded streams: each sampler stage is compared
//! with the probabilities it should produce.

use crate::{Sampler, SamplingParams, TokenId};

const DRAWS: usize = 20_000;
/// Four standard errors of a frequency estimate from 20k draws at p = 0.5.
const TOLERANCE: f64 = 0.015;

/// Only the stage under test is on: temperature 1, no truncation.
fn plain() -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed: Some(42),
        ..SamplingParams::default()
    }
}

fn logits_from_probs(probs: &[f64]) -> Vec<f32> {
    probs.iter().map(|p| p.ln() as f32).collect()
}

fn softmax(logits: &[f32], temperature: f64) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let w: Vec<f64> = logits
        .iter()
        .map(|&l| (f64::from(l - max) / temperature).exp())
        .collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

fn frequencies(params: SamplingParams, logits: &[f32], history: &[TokenId]) -> Vec<f64> {
    let mut sampler = Sampler::new(params).unwrap();
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..DRAWS {
        counts[sampler.sample(logits, history).token as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / DRAWS as f64).collect()
}

fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() < TOLERANCE,
            "token {i}: frequency {g:.4}, expected {w:.4}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// `probs` restricted to `keep` and renormalised.
fn renormalised(probs: &[f64], keep: &[usize]) -> Vec<f64> {
    let total: f64 = keep.iter().map(|&i| probs[i]).sum();
    (0..probs.len())
        .map(|i| {
            if keep.contains(&i) {
                probs[i] / total
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
fn plain_softmax_draws_match_the_probabilities() {
    let probs = [0.1, 0.4, 0.2, 0.3];
    assert_close(
        &frequencies(plain(), &logits_from_probs(&probs), &[]),
        &probs,
    );
}

#[test]
fn top_k_stays_within_the_k_best_and_renormalises() {
    let probs = [0.05, 0.3, 0.1, 0.2, 0.15, 0.02, 0.18];
    let params = SamplingParams {
        top_k: 3,
        ..plain()
    };
    let freq = frequencies(params, &logits_from_probs(&probs), &[]);
    assert_close(&freq, &renormalised(&probs, &[1, 3, 6]));
    for i in [0, 2, 4, 5] {
        assert_eq!(freq[i], 0.0, "token {i} is outside the top 3");
    }
}

#[test]
fn top_p_keeps_the_minimal_nucleus() {
    // Cumulative 0.5, 0.7, 0.85: 0.8 needs the first three, no more.
    let probs = [0.5, 0.2, 0.15, 0.1, 0.05];
    let params = SamplingParams {
        top_p: 0.8,
        ..plain()
    };
    let freq = frequencies(params, &logits_from_probs(&probs), &[]);
    assert_close(&freq, &renormalised(&probs, &[0, 1, 2]));
}

#[test]
fn top_p_applies_after_top_k() {
    // top-k 2 leaves {0.4, 0.3} -> {0.571, 0.429}; top-p 0.5 then needs only the first.
    let probs = [0.4, 0.3, 0.2, 0.1];
    let params = SamplingParams {
        top_k: 2,
        top_p: 0.5,
        ..plain()
    };
    let freq = frequencies(params, &logits_from_probs(&probs), &[]);
    assert_eq!(freq, vec![1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn min_p_threshold_is_relative_to_the_most_likely() {
    // 0.125 * 0.4 = 0.05: keeps 0.4, 0.3, 0.2, 0.06; drops 0.04.
    let probs = [0.4, 0.3, 0.2, 0.06, 0.04];
    let params = SamplingParams {
        min_p: 0.125,
        ..plain()
    };
    let freq = frequencies(params, &logits_from_probs(&probs), &[]);
    assert_close(&freq, &renormalised(&probs, &[0, 1, 2, 3]));
    assert_eq!(freq[4], 0.0);
}

#[test]
fn temperature_sharpens_and_flattens() {
    let logits = [2.0, 1.0, 0.0];
    let mut top_share = Vec::new();
    for t in [0.5, 1.0, 2.0] {
        let params = SamplingParams {
            temperature: t,
            ..plain()
        };
        let freq = frequencies(params, &logits, &[]);
        assert_close(&freq, &softmax(&logits, f64::from(t)));
        top_share.push(freq[0]);
    }
    // softmax at t=0.5: 0.867; t=1: 0.665; t=2: 0.506
    assert!(
        top_share[0] > top_share[1] && top_share[1] > top_share[2],
        "{top_share:?}"
    );
}

#[test]
fn temperature_applies_after_truncation() {
    // min-p 0.3 at t=1 keeps only tokens 0 and 1 (e^-1 = 0.37 >= 0.3, e^-2 < 0.3);
    // a high temperature then flattens those two but cannot revive token 2.
    let logits = [2.0, 1.0, 0.0];
    let params = SamplingParams {
        temperature: 4.0,
        min_p: 0.3,
        ..plain()
    };
    let freq = frequencies(params, &logits, &[]);
    let two = softmax(&logits[..2], 4.0);
    assert_close(&freq, &[two[0], two[1], 0.0]);
}

#[test]
fn greedy_takes_the_argmax_with_lowest_id_on_ties() {
    let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(s.sample(&[1.0, 5.0, 5.0, 2.0], &[]).token, 1);
    assert_eq!(s.sample(&[0.0, 0.0, 0.0], &[]).token, 0);
    assert_eq!(s.sample(&[-3.0, -1.0, -2.0], &[]).token, 1);
}

/// The plain greedy path (no copy) and the prepared one (a logprob asked
/// for) pick the same token as one scan would, with NaN and infinities
/// anywhere and lengths around the argmax's eight lanes.
#[test]
fn greedy_paths_agree_with_a_scan() {
    let scan = |l: &[f32]| {
        let clean = |x: f32| match x {
            x if x.is_nan() => f32::NEG_INFINITY,
            f32::INFINITY => f32::MAX,
            x => x,
        };
        let (mut best, mut score) = (0, f32::NEG_INFINITY);
        for (i, &x) in l.iter().enumerate() {
            if clean(x) > score {
                (best, score) = (i as TokenId, clean(x));
            }
        }
        best
    };
    let mut plain = Sampler::new(SamplingParams::greedy()).unwrap();
    let mut prepared = Sampler::new(SamplingParams {
        logprobs: Some(0),
        ..SamplingParams::greedy()
    })
    .unwrap();
    let mut state = 7u64;
    for len in [1, 7, 8, 9, 16, 17, 31, 1000] {
        for _ in 0..50 {
            let logits: Vec<f32> = (0..len)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    match state >> 60 {
                        0 => f32::NAN,
                        1 => f32::INFINITY,
                        2 => f32::NEG_INFINITY,
                        // Few distinct values: ties.
                        v => (state >> 61) as f32 - v as f32 * 0.5,
                    }
                })
                .collect();
            let want = scan(&logits);
            assert_eq!(plain.sample(&logits, &[]).token, want, "{logits:?}");
            assert_eq!(prepared.sample(&logits, &[]).token, want, "{logits:?}");
        }
    }
    assert_eq!(plain.sample(&[f32::NAN; 9], &[]).token, 0);
}

#[test]
fn repeat_penalty_respects_the_window() {
    let logits = [3.0, 2.9];
    let params = SamplingParams {
        repeat_penalty: 1.1,
        repeat_last_n: 2,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(params).unwrap();
    assert_eq!(s.sample(&logits, &[]).token, 0);
    // 3.0 / 1.1 = 2.73 < 2.9
    assert_eq!(s.sample(&logits, &[0]).token, 1);
    // Token 0 is three tokens back, outside the window of 2.
    assert_eq!(s.sample(&logits, &[0, 5, 6]).token, 0);
}

#[test]
fn penalties_shift_logprobs_of_exactly_the_window_tokens() {
    let logits = [1.0, 1.0, 1.0, 1.0];
    let params = SamplingParams {
        presence_penalty: 0.5,
        frequency_penalty: 0.25,
        repeat_last_n: 3,
        logprobs: Some(4),
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(params).unwrap();
    // Window: [1, 1, 2]; token 3 is older.
    let out = s.sample(&logits, &[3, 1, 1, 2]);
    // Penalised logits: [1, 1 - 0.5 - 0.5, 1 - 0.5 - 0.25, 1] = [1, 0, 0.25, 1]
    let expected = [1.0f64, 0.0, 0.25, 1.0];
    let lse = expected.iter().map(|x| x.exp()).sum::<f64>().ln();
    assert_eq!(out.token, 0);
    let by_id = |id: TokenId| out.top_logprobs.iter().find(|t| t.0 == id).unwrap().1;
    for (id, x) in expected.iter().enumerate() {
        assert!(
            (f64::from(by_id(id as TokenId)) - (x - lse)).abs() < 1e-6,
            "token {id}"
        );
    }
}

#[test]
fn logit_bias_promotes_and_bans() {
    let logits = [2.0, 1.0, 0.5];
    let params = SamplingParams {
        logit_bias: vec![(2, 2.0)],
        ..SamplingParams::greedy()
    };
    assert_eq!(Sampler::new(params).unwrap().sample(&logits, &[]).token, 2);

    let params = SamplingParams {
        logit_bias: vec![(0, f32::NEG_INFINITY)],
        ..plain()
    };
    let freq = frequencies(params, &logits, &[]);
    assert_eq!(freq[0], 0.0);
    assert_close(&freq, &renormalised(&softmax(&logits, 1.0), &[1, 2]));
}

#[test]
fn logprobs_by_hand() {
    // Bias makes the logits [2, 2, 3]; log-softmax: x - ln(2e^2 + e^3).
    let params = SamplingParams {
        logit_bias: vec![(0, 1.0)],
        logprobs: Some(2),
        ..SamplingParams::greedy()
    };
    let out = Sampler::new(params).unwrap().sample(&[1.0, 2.0, 3.0], &[]);
    let lse = (2.0 * 2f64.exp() + 3f64.exp()).ln();
    assert_eq!(out.token, 2);
    assert!((f64::from(out.logprob.unwrap()) - (3.0 - lse)).abs() < 1e-6);
    assert_eq!(out.top_logprobs.len(), 2);
    assert_eq!(out.top_logprobs[0].0, 2);
    assert_eq!(
        out.top_logprobs[1].0, 0,
        "tie between 0 and 1 goes to the lower id"
    );
    assert!((f64::from(out.top_logprobs[1].1) - (2.0 - lse)).abs() < 1e-6);
}

#[test]
fn logprobs_ignore_temperature_and_truncation() {
    let logits = [0.3, 1.7, -0.4, 1.1];
    let report = |temperature: f32, top_k: usize| {
        let params = SamplingParams {
            temperature,
            top_k,
            logprobs: Some(4),
            seed: Some(1),
            ..SamplingParams::default()
        };
        Sampler::new(params)
            .unwrap()
            .sample(&logits, &[])
            .top_logprobs
    };
    assert_eq!(report(0.1, 1), report(2.0, 0));
    assert!(SamplingParams::default().logprobs.is_none());
    let out = Sampler::new(plain()).unwrap().sample(&logits, &[]);
    assert!(out.top_logprobs.is_empty());
    assert!(out.logprob.is_none());
}

#[test]
fn same_seed_same_tokens_different_seed_different_tokens() {
    let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32 * 0.1).collect();
    let run = |seed: u64| -> Vec<TokenId> {
        let mut s = Sampler::new(SamplingParams {
            seed: Some(seed),
            ..plain()
        })
        .unwrap();
        (0..200).map(|_| s.sample(&logits, &[]).token).collect()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    let s = Sampler::new(SamplingParams {
        seed: None,
        ..plain()
    })
    .unwrap();
    let replay = Sampler::new(SamplingParams {
        seed: Some(s.seed()),
        ..plain()
    })
    .unwrap();
    assert_eq!(s.seed(), replay.seed());
}

/// Pins the stream so a change of RNG or draw order is noticed: seeded runs
/// must give the same tokens on every platform and release.
#[test]
fn seeded_stream_is_stable() {
    let logits: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut s = Sampler::new(SamplingParams {
        seed: Some(2024),
        ..plain()
    })
    .unwrap();
    let tokens: Vec<TokenId> = (0..12).map(|_| s.sample(&logits, &[]).token).collect();
    assert_eq!(tokens, PINNED);
}
const PINNED: [TokenId; 12] = [10, 9, 7, 2, 14, 7, 0, 5, 7, 5, 8, 3];

#[test]
fn non_finite_logits_do_not_panic() {
    let mut greedy = Sampler::new(SamplingParams {
        logprobs: Some(3),
        ..SamplingParams::greedy()
    })
    .unwrap();
    let out = greedy.sample(&[f32::NAN, 1.0, f32::INFINITY, f32::INFINITY], &[]);
    assert_eq!(out.token, 2);
    assert!(out.logprob.unwrap().is_finite());

    let mut s = Sampler::new(SamplingParams {
        logprobs: Some(2),
        ..SamplingParams::default()
    })
    .unwrap();
    for _ in 0..100 {
        let out = s.sample(&[f32::NAN, 0.5, f32::NEG_INFINITY, 0.7], &[1, 1]);
        assert!(out.token == 1 || out.token == 3, "{out:?}");
    }
    let masked = s.sample(&[f32::NAN, f32::NEG_INFINITY], &[]);
    assert_eq!((masked.token, masked.logprob), (0, Some(f32::NEG_INFINITY)));
    let empty = s.sample(&[], &[0, 1]);
    assert_eq!(empty.token, 0);
    let huge = s.sample(&[f32::MAX, -f32::MAX, f32::MAX], &[]);
    assert!(huge.token == 0 || huge.token == 2);

    let tiny_t = SamplingParams {
        temperature: 1e-45,
        ..plain()
    };
    let mut s = Sampler::new(tiny_t).unwrap();
    for _ in 0..10 {
        assert_eq!(s.sample(&[0.5, 2.0, 1.0], &[]).token, 1);
    }
}

#[test]
fn out_of_vocabulary_bias_and_history_are_ignored() {
    let params = SamplingParams {
        logit_bias: vec![(99, 10.0)],
        repeat_penalty: 2.0,
        ..SamplingParams::greedy()
    };
    let out = Sampler::new(params).unwrap().sample(&[0.0, 1.0], &[42, 7]);
    assert_eq!(out.token, 1);
}

#[test]
fn large_vocabulary_with_default_chain() {
    let n = 262_144;
    let logits: Vec<f32> = (0..n)
        .map(|i| ((i as f32) * 0.618_034).fract() * 8.0 + if i % 1000 == 0 { 6.0 } else { 0.0 })
        .collect();
    let history: Vec<TokenId> = (0..4096).map(|i| (i * 61) % n as TokenId).collect();
    for params in [
        SamplingParams {
            seed: Some(3),
            logprobs: Some(5),
            ..SamplingParams::default()
        },
        SamplingParams {
            seed: Some(3),
            top_k: 0,
            min_p: 0.0,
            ..SamplingParams::default()
        },
        SamplingParams {
            seed: Some(3),
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.1,
            ..SamplingParams::default()
        },
    ] {
        let mut s = Sampler::new(params).unwrap();
        for _ in 0..20 {
            let out = s.sample(&logits, &history);
            assert!((out.token as usize) < n);
            assert!(out.logprob.is_none_or(f32::is_finite));
        }
    }
}

/// Allows the tokens of a set; counts how often it had to mask.
struct Only {
    allowed: Vec<TokenId>,
    masked: usize,
}

impl crate::TokenFilter for Only {
    fn allows(&mut self, token: TokenId) -> bool {
        self.allowed.contains(&token)
    }
    fn accept(&mut self, _: TokenId) {}
    fn restrict(&mut self, scores: &mut [f32]) {
        self.masked += 1;
        for (t, s) in scores.iter_mut().enumerate() {
            if !self.allowed.contains(&(t as TokenId)) {
                *s = f32::NEG_INFINITY;
            }
        }
    }
}

#[test]
fn a_filter_leaves_the_distribution_renormalised_over_what_it_allows() {
    let probs = [0.4, 0.3, 0.2, 0.1];
    let logits = logits_from_probs(&probs);
    let mut sampler = Sampler::new(plain()).unwrap();
    let mut filter = Only {
        allowed: vec![1, 3],
        masked: 0,
    };
    let mut counts = vec![0usize; probs.len()];
    for _ in 0..DRAWS {
        counts[sampler.sample_filtered(&logits, &[], &mut filter).token as usize] += 1;
    }
    let got: Vec<f64> = counts.iter().map(|&c| c as f64 / DRAWS as f64).collect();
    assert_close(&got, &renormalised(&probs, &[1, 3]));
    // Masks only when the first draw is refused (about 60% of the time).
    let rate = filter.masked as f64 / DRAWS as f64;
    assert!((rate - 0.6).abs() < TOLERANCE * 2.0, "mask rate {rate}");
}

#[test]
fn a_filter_under_greedy_picks_the_best_allowed_token() {
    let logits = [0.5f32, 3.0, 2.0, 2.5];
    let greedy = SamplingParams {
        temperature: 0.0,
        ..plain()
    };
    let mut sampler = Sampler::new(greedy).unwrap();
    let mut filter = Only {
        allowed: vec![0, 2, 3],
        masked: 0,
    };
    assert_eq!(sampler.sample_filtered(&logits, &[], &mut filter).token, 3);
    filter.allowed = vec![1];
    assert_eq!(sampler.sample_filtered(&logits, &[], &mut filter).token, 1);
    assert_eq!(filter.masked, 1);
}
