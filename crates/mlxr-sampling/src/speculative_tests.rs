//! The speculative verifier: greedy steps give exactly the tokens of plain
//! greedy sampling, and sampled steps emit tokens distributed as the
//! target's transformed distribution (chi-square over seeded trials, with a
//! draft that deliberately disagrees; the same test rejects a wrong rule).

use crate::{Draft, Sampler, SamplingParams, TokenFilter, TokenId};

const TRIALS: u64 = 20_000;

fn rows(n: usize, vocab: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            (0..vocab)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((s >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0
                })
                .collect()
        })
        .collect()
}

fn greedy() -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        repeat_penalty: 1.3,
        seed: Some(1),
        ..SamplingParams::default()
    }
}

/// Plain greedy sampling of `logits` one row after the other, each token
/// joining the history of the next.
fn sequential(params: &SamplingParams, logits: &[Vec<f32>], history: &[TokenId]) -> Vec<TokenId> {
    let mut sampler = Sampler::new(params.clone()).unwrap();
    let mut seen = history.to_vec();
    logits
        .iter()
        .map(|row| {
            let t = sampler.sample(row, &seen).token;
            seen.push(t);
            t
        })
        .collect()
}

#[test]
fn greedy_steps_equal_plain_greedy_sampling() {
    let vocab = 50;
    let history: Vec<TokenId> = vec![3, 7, 7, 12];
    for seed in 0..20 {
        let logits = rows(6, vocab, seed);
        let refs: Vec<&[f32]> = logits.iter().map(Vec::as_slice).collect();
        let want = sequential(&greedy(), &logits, &history);
        // A draft right for its first `right` tokens, then wrong.
        for right in 0..=5 {
            let mut draft: Vec<TokenId> = want[..5].to_vec();
            if right < 5 {
                draft[right] = (want[right] + 1) % vocab as TokenId;
            }
            let mut sampler = Sampler::new(greedy()).unwrap();
            let got = sampler.verify(
                &refs,
                &history,
                Draft {
                    tokens: &draft,
                    probs: None,
                },
            );
            assert_eq!(got.accepted, right, "seed {seed}");
            let tokens: Vec<TokenId> = got.tokens.iter().map(|s| s.token).collect();
            assert_eq!(tokens, want[..=right], "seed {seed}, {right} right");
        }
    }
}

/// A test-side LCG for drawing draft tokens.
struct Lcg(u64);

impl Lcg {
    fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn draw(&mut self, probs: &[f32]) -> TokenId {
        let u = self.uniform();
        let mut c = 0.0;
        for (i, &p) in probs.iter().enumerate() {
            c += f64::from(p);
            if u < c {
                return i as TokenId;
            }
        }
        (probs.len() - 1) as TokenId
    }
}

/// The distribution the target samples from at one position.
fn target(params: &SamplingParams, row: &[f32], history: &[TokenId]) -> Vec<f32> {
    let mut sampler = Sampler::new(params.clone()).unwrap();
    sampler.prepare(row, history);
    let mut p = Vec::new();
    sampler.distribution(&mut p);
    p
}

/// Pearson's statistic of `counts` against `probs`; a count where the
/// probability is 0 is a failure of its own. Returns (statistic, degrees of
/// freedom).
fn chi_square(counts: &[u64], probs: &[f32]) -> (f64, usize) {
    let n: u64 = counts.iter().sum();
    let mut stat = 0.0;
    let mut cells = 0;
    for (&c, &p) in counts.iter().zip(probs) {
        if p == 0.0 {
            assert_eq!(c, 0, "a token the target cannot sample was emitted");
            continue;
        }
        let e = n as f64 * f64::from(p);
        stat += (c as f64 - e).powi(2) / e;
        cells += 1;
    }
    (stat, cells - 1)
}

/// Chi-square critical values at the 0.001 level (df 1..=7).
fn critical(df: usize) -> f64 {
    [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32][df - 1]
}

fn sampled(top_k: usize) -> SamplingParams {
    SamplingParams {
        temperature: 0.8,
        top_k,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.2,
        ..SamplingParams::default()
    }
}

/// How often each token comes first out of a 2-token speculative step with
/// drafts drawn from `q` (or copied, one-hot, when `with_probs` is false),
/// by `rule`.
fn first_tokens(
    params: &SamplingParams,
    logits: &[Vec<f32>],
    history: &[TokenId],
    q: &[Vec<f32>],
    with_probs: bool,
    rule: impl Fn(&mut Sampler, &[&[f32]], &[TokenId], Draft) -> TokenId,
) -> Vec<u64> {
    let vocab = logits[0].len();
    let refs: Vec<&[f32]> = logits.iter().map(Vec::as_slice).collect();
    let mut lcg = Lcg(99);
    let mut counts = vec![0u64; vocab];
    for trial in 0..TRIALS {
        let draft: Vec<TokenId> = q.iter().map(|q| lcg.draw(q)).collect();
        let mut sampler = Sampler::new(SamplingParams {
            seed: Some(trial),
            ..params.clone()
        })
        .unwrap();
        let d = Draft {
            tokens: &draft,
            probs: with_probs.then_some(q),
        };
        counts[rule(&mut sampler, &refs, history, d) as usize] += 1;
    }
    counts
}

/// `k` draft distributions that disagree with `p`: most mass on the tokens
/// the target likes least.
fn disagreeing(p: &[f32], k: usize) -> Vec<Vec<f32>> {
    let w: Vec<f32> = p.iter().map(|&x| 1.0 - x + 0.05).collect();
    let total: f32 = w.iter().sum();
    vec![w.iter().map(|x| x / total).collect(); k]
}

fn verifier(s: &mut Sampler, logits: &[&[f32]], history: &[TokenId], d: Draft) -> TokenId {
    s.verify(logits, history, d).tokens[0].token
}

#[test]
fn sampled_steps_follow_the_target_distribution() {
    let history: Vec<TokenId> = vec![1, 2, 2];
    for (top_k, seed) in [(0, 5), (4, 6)] {
        let params = sampled(top_k);
        let logits = rows(3, 6, seed);
        let p = target(&params, &logits[0], &history);
        let q = disagreeing(&p, 2);
        for with_probs in [true, false] {
            let counts = first_tokens(&params, &logits, &history, &q, with_probs, verifier);
            let (stat, df) = chi_square(&counts, &p);
            assert!(
                stat < critical(df),
                "top_k {top_k}, draft probs {with_probs}: chi-square {stat:.1} over {df} df \
                 (critical {:.1}): {counts:?} against {p:?}",
                critical(df)
            );
        }
    }
}

/// The classic mistake: after a rejection, sample from p instead of the
/// residual max(0, p - q). The chi-square test above must catch it.
#[test]
fn the_test_rejects_a_wrong_rule() {
    let history: Vec<TokenId> = vec![1, 2, 2];
    let params = sampled(0);
    let logits = rows(3, 6, 5);
    let p = target(&params, &logits[0], &history);
    let q = disagreeing(&p, 2);
    let wrong = |s: &mut Sampler, _: &[&[f32]], _: &[TokenId], d: Draft| {
        let x = d.tokens[0];
        let qx = d.probs.unwrap()[0][x as usize];
        if s.uniform() < f64::from(p[x as usize] / qx) {
            return x;
        }
        let u = s.uniform();
        crate::sampler::pick(&p, u).unwrap() as TokenId
    };
    let counts = first_tokens(&params, &logits, &history, &q, true, wrong);
    let (stat, df) = chi_square(&counts, &p);
    assert!(
        stat > critical(df),
        "a wrong rule passed: chi-square {stat:.1} over {df} df"
    );
}

#[test]
#[should_panic(expected = "one logits row per draft token")]
fn a_step_needs_a_row_past_the_drafts() {
    let logits = rows(2, 8, 1);
    let refs: Vec<&[f32]> = logits.iter().map(Vec::as_slice).collect();
    let mut sampler = Sampler::new(greedy()).unwrap();
    sampler.verify(
        &refs,
        &[],
        Draft {
            tokens: &[1, 2],
            probs: None,
        },
    );
}

/// A grammar stand-in whose allowed tokens change with each token: even
/// ids, then odd, then even...
struct Alternating {
    pos: usize,
}

impl TokenFilter for Alternating {
    fn allows(&mut self, token: TokenId) -> bool {
        token as usize % 2 == self.pos % 2
    }
    fn restrict(&mut self, scores: &mut [f32]) {
        for (t, s) in scores.iter_mut().enumerate() {
            if t % 2 != self.pos % 2 {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    fn accept(&mut self, _: TokenId) {
        self.pos += 1;
    }
}

#[test]
fn filtered_greedy_steps_equal_filtered_greedy_sampling() {
    let history: Vec<TokenId> = vec![3, 7, 7, 12];
    for seed in 0..20 {
        let logits = rows(6, 50, seed);
        let refs: Vec<&[f32]> = logits.iter().map(Vec::as_slice).collect();
        let mut plain = Sampler::new(greedy()).unwrap();
        let mut filter = Alternating { pos: 0 };
        let mut seen = history.clone();
        let want: Vec<TokenId> = logits
            .iter()
            .map(|row| {
                let t = plain.sample_filtered(row, &seen, &mut filter).token;
                filter.accept(t);
                seen.push(t);
                t
            })
            .collect();
        for right in 0..=5 {
            let mut draft = want[..5].to_vec();
            if right < 5 {
                draft[right] += 1; // the other parity: refused
            }
            let mut sampler = Sampler::new(greedy()).unwrap();
            let got = sampler.verify_filtered(
                &refs,
                &history,
                Draft {
                    tokens: &draft,
                    probs: None,
                },
                &mut Alternating { pos: 0 },
            );
            assert_eq!(got.accepted, right, "seed {seed}");
            let ids: Vec<TokenId> = got.tokens.iter().map(|s| s.token).collect();
            assert_eq!(ids, want[..=right], "seed {seed}, right {right}");
        }
    }
}

#[test]
fn filtered_sampled_steps_follow_the_filtered_target() {
    let history: Vec<TokenId> = vec![1, 2, 2];
    let params = sampled(0);
    let logits = rows(3, 6, 5);
    let mut p = target(&params, &logits[0], &history);
    // The target under the filter: odd ids out, renormalised.
    p.iter_mut().skip(1).step_by(2).for_each(|x| *x = 0.0);
    let total: f32 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= total);
    let q = disagreeing(&target(&params, &logits[0], &history), 2);
    let rule = |s: &mut Sampler, l: &[&[f32]], h: &[TokenId], d: Draft| {
        s.verify_filtered(l, h, d, &mut Alternating { pos: 0 })
            .tokens[0]
            .token
    };
    for with_probs in [true, false] {
        let counts = first_tokens(&params, &logits, &history, &q, with_probs, rule);
        let (stat, df) = chi_square(&counts, &p);
        assert!(
            stat < critical(df),
            "chi-square {stat:.1} over {df} df: {counts:?} against {p:?}"
        );
    }
}
