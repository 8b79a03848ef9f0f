//! The scheduler driven without a model: chunks are "computed" as soon as
//! they are scheduled and sampling appends a made-up token.

use super::*;
use crate::request::{GenerateRequest, Prompt};
use crate::spec::Speculation;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn config(budget: usize, max_seqs: usize) -> EngineConfig {
    EngineConfig {
        block_size: 4,
        max_num_batched_tokens: budget,
        max_num_seqs: max_seqs,
        ..EngineConfig::default()
    }
}

fn sequence(id: u64, prompt: Vec<u32>, max_tokens: usize) -> Sequence {
    let req = GenerateRequest::new(Prompt::Tokens(prompt.clone()));
    Sequence::new(SeqId(id), &req, prompt, max_tokens, Speculation::default()).unwrap()
}

/// Runs one step as the engine would, minus the model; sequences that reach
/// `max_tokens` are removed. Returns the step's chunks.
fn step(s: &mut Scheduler, rng: &mut Rng) -> Vec<ScheduledChunk> {
    let chunks = s.schedule(&StepCosts::default());
    let mut seen = std::collections::HashSet::new();
    for c in &chunks {
        assert!(
            seen.insert(c.seq),
            "{:?} scheduled twice in one step",
            c.seq
        );
        let seq = s.seq(c.seq).unwrap();
        assert_eq!(
            c.start_pos, seq.num_computed,
            "chunk starts where the KV ends"
        );
        assert!(c.start_pos + c.len - c.draft <= seq.tokens.len());
        assert_eq!(c.draft, seq.draft.len());
        if c.draft > 0 {
            assert_eq!(
                c.start_pos + c.len - c.draft,
                seq.tokens.len(),
                "drafts follow the last token"
            );
        }
        let table = s.block_table(c.seq);
        assert!(table.len() * 4 >= c.start_pos + c.len, "slots reserved");
    }
    s.blocks().check_invariants().unwrap();
    for c in &chunks {
        // A random prefix of the draft stands, then one more token.
        let accepted = rng.below(c.draft + 1);
        s.chunk_computed(c, accepted);
        if c.samples {
            let seq = s.seq_mut(c.seq).unwrap();
            let draft = std::mem::take(&mut seq.draft);
            seq.tokens.extend_from_slice(&draft[..accepted]);
            seq.tokens.push(1000 + rng.below(5) as u32);
            assert_eq!(seq.num_computed + 1, seq.tokens.len());
            if seq.num_generated() >= seq.max_tokens {
                s.remove(c.seq);
            }
        }
    }
    chunks
}

#[test]
fn decode_tokens_come_first_and_long_prompts_are_chunked() {
    let mut s = Scheduler::new(&config(8, 8), 64);
    s.add(sequence(1, vec![1, 2, 3], 10));
    let mut rng = Rng(1);
    step(&mut s, &mut rng); // prefill of 1
    s.add(sequence(2, (0..20).collect(), 10));
    let chunks = step(&mut s, &mut rng);
    assert_eq!(
        chunks[0],
        ScheduledChunk {
            seq: SeqId(1),
            start_pos: 3,
            len: 1,
            draft: 0,
            samples: true
        }
    );
    assert_eq!(
        chunks[1],
        ScheduledChunk {
            seq: SeqId(2),
            start_pos: 0,
            len: 7,
            draft: 0,
            samples: false
        }
    );
    let chunks = step(&mut s, &mut rng);
    assert_eq!(
        chunks[1],
        ScheduledChunk {
            seq: SeqId(2),
            start_pos: 7,
            len: 7,
            draft: 0,
            samples: false
        }
    );
    let chunks = step(&mut s, &mut rng);
    assert_eq!(
        chunks[1],
        ScheduledChunk {
            seq: SeqId(2),
            start_pos: 14,
            len: 6,
            draft: 0,
            samples: true
        }
    );
}

#[test]
fn a_waiting_request_is_not_stuck_behind_a_long_prefill() {
    let mut cfg = config(16, 8);
    cfg.long_prefill_token_threshold = 10;
    let mut s = Scheduler::new(&cfg, 64);
    s.add(sequence(1, (0..100).collect(), 4));
    let mut rng = Rng(5);
    // Alone, the long prompt takes the whole budget.
    assert_eq!(step(&mut s, &mut rng)[0].len, 16);
    s.add(sequence(2, vec![7, 8, 9], 4));
    let chunks = step(&mut s, &mut rng);
    assert_eq!(
        chunks[0],
        ScheduledChunk {
            seq: SeqId(1),
            start_pos: 16,
            len: 10,
            draft: 0,
            samples: false
        }
    );
    assert_eq!(
        chunks[1],
        ScheduledChunk {
            seq: SeqId(2),
            start_pos: 0,
            len: 3,
            draft: 0,
            samples: true
        }
    );
}

#[test]
fn out_of_blocks_preempts_the_newest_and_recomputes_it() {
    // 6 blocks of 4 tokens; two sequences of 8 prompt tokens growing to 16.
    let mut s = Scheduler::new(&config(64, 8), 6);
    s.add(sequence(1, (0..8).collect(), 8));
    s.add(sequence(2, (100..108).collect(), 8));
    let mut rng = Rng(7);
    let mut finish_order = Vec::new();
    for _ in 0..40 {
        if s.is_idle() {
            break;
        }
        let chunks = step(&mut s, &mut rng);
        for c in chunks {
            if s.seq(c.seq).is_none() {
                finish_order.push(c.seq);
            }
        }
    }
    assert!(s.is_idle(), "both finish");
    assert!(
        s.num_preemptions() > 0,
        "6 blocks cannot hold 2 x 16 tokens"
    );
    assert_eq!(s.blocks().num_free_blocks(), 6);
    assert_eq!(
        finish_order,
        vec![SeqId(1), SeqId(2)],
        "the older one was never preempted"
    );
}

#[test]
fn priority_then_arrival_order() {
    let mut s = Scheduler::new(&config(64, 1), 64);
    s.add(sequence(1, vec![1; 3], 1));
    s.add(sequence(2, vec![2; 3], 1));
    let mut high = sequence(3, vec![3; 3], 1);
    high.priority = 5;
    s.add(high);
    let mut rng = Rng(3);
    let order: Vec<SeqId> = (0..3).map(|_| step(&mut s, &mut rng)[0].seq).collect();
    assert_eq!(order, vec![SeqId(3), SeqId(1), SeqId(2)]);
}

/// 1000 random submit / abort / finish steps over a small pool with shared
/// prefixes: invariants hold throughout, and at the end every block is free
/// (cached prefixes stay findable but are on the free list).
#[test]
fn random_submit_abort_finish_never_leaks_blocks() {
    for seed in 1..=4u64 {
        let num_blocks = 40;
        let mut s = Scheduler::new(&config(16, 6), num_blocks);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let stems: Vec<Vec<u32>> = (0..3)
            .map(|i| (0..12).map(|t| i * 100 + t).collect())
            .collect();
        let mut next_id = 1;
        let mut live: Vec<SeqId> = Vec::new();
        let mut drafts = 0;
        for _ in 0..1000 {
            match rng.below(10) {
                0..=2 => {
                    let mut prompt = stems[rng.below(3)][..rng.below(13)].to_vec();
                    prompt.extend((0..1 + rng.below(20)).map(|_| rng.below(50) as u32));
                    let mut seq = sequence(next_id, prompt, 1 + rng.below(12));
                    if rng.below(2) == 0 {
                        // Prompt lookup over a 5-token output alphabet drafts often.
                        let req = GenerateRequest::new(Prompt::Tokens(seq.tokens.clone()));
                        seq = Sequence::new(
                            seq.id,
                            &req,
                            seq.tokens.clone(),
                            seq.max_tokens,
                            Speculation {
                                ngram_min: 1,
                                ..Speculation::ngram(1 + rng.below(6))
                            },
                        )
                        .unwrap();
                    }
                    s.add(seq);
                    live.push(SeqId(next_id));
                    next_id += 1;
                }
                3 if !live.is_empty() => {
                    let id = live.swap_remove(rng.below(live.len()));
                    s.remove(id);
                }
                _ => {
                    drafts += step(&mut s, &mut rng)
                        .iter()
                        .map(|c| c.draft)
                        .sum::<usize>();
                }
            }
            live.retain(|&id| s.seq(id).is_some());
            s.blocks().check_invariants().unwrap();
            assert!(s.num_running() <= 6);
        }
        for _ in 0..10_000 {
            if s.is_idle() {
                break;
            }
            step(&mut s, &mut rng);
        }
        assert!(s.is_idle(), "seed {seed}: every request finishes");
        assert_eq!(
            s.blocks().num_free_blocks(),
            num_blocks,
            "seed {seed}: leaked blocks"
        );
        assert_eq!(s.blocks().num_seqs(), 0);
        s.blocks().check_invariants().unwrap();
        assert!(drafts > 0, "seed {seed}: nothing was drafted");
        assert!(
            s.blocks().stats().hits > 0,
            "seed {seed}: shared stems hit the cache"
        );
    }
}
