//! Engine counters, gauges and histograms, named after vLLM's metrics with an
//! `mlxr:` prefix, rendered in Prometheus' text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::events::FinishReason;
use crate::spec::MAX_DRAFT_TOKENS;

/// Latency buckets in seconds (vLLM's TTFT buckets, trimmed).
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0,
];

#[derive(Default)]
pub struct EngineMetrics {
    requests_running: AtomicU64,
    requests_waiting: AtomicU64,
    /// f64 bits, 0..=1.
    kv_cache_usage: AtomicU64,
    prefix_cache_queries: AtomicU64,
    prefix_cache_hits: AtomicU64,
    preemptions: AtomicU64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    spec_drafts: AtomicU64,
    spec_draft_tokens: AtomicU64,
    spec_accepted_tokens: AtomicU64,
    /// Position `i`: drafts whose token `i` stood.
    spec_accepted_per_pos: [AtomicU64; MAX_DRAFT_TOKENS],
    /// Index `k - 1`: drafts of `k` tokens (the lengths goodput chose).
    spec_drafts_per_len: [AtomicU64; MAX_DRAFT_TOKENS],
    finished: [AtomicU64; 3],
    ttft: Histogram,
    inter_token: Histogram,
    e2e: Histogram,
    queue_time: Histogram,
}

/// A snapshot of the gauges the engine thread updates after every step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineGauges {
    pub running: usize,
    pub waiting: usize,
    pub kv_cache_usage: f64,
    pub prefix_cache_queries: u64,
    pub prefix_cache_hits: u64,
    pub preemptions: u64,
}

impl EngineMetrics {
    pub fn set_gauges(&self, g: EngineGauges) {
        let relaxed = Ordering::Relaxed;
        self.requests_running.store(g.running as u64, relaxed);
        self.requests_waiting.store(g.waiting as u64, relaxed);
        self.kv_cache_usage
            .store(g.kv_cache_usage.to_bits(), relaxed);
        self.prefix_cache_queries
            .store(g.prefix_cache_queries, relaxed);
        self.prefix_cache_hits.store(g.prefix_cache_hits, relaxed);
        self.preemptions.store(g.preemptions, relaxed);
    }

    pub fn gauges(&self) -> EngineGauges {
        let relaxed = Ordering::Relaxed;
        EngineGauges {
            running: self.requests_running.load(relaxed) as usize,
            waiting: self.requests_waiting.load(relaxed) as usize,
            kv_cache_usage: f64::from_bits(self.kv_cache_usage.load(relaxed)),
            prefix_cache_queries: self.prefix_cache_queries.load(relaxed),
            prefix_cache_hits: self.prefix_cache_hits.load(relaxed),
            preemptions: self.preemptions.load(relaxed),
        }
    }

    pub fn add_prompt_tokens(&self, n: usize) {
        self.prompt_tokens.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn add_generation_tokens(&self, n: usize) {
        self.generation_tokens
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A step verified `drafted` draft tokens of one sequence; the first
    /// `accepted` stood.
    pub fn observe_draft(&self, drafted: usize, accepted: usize) {
        let relaxed = Ordering::Relaxed;
        self.spec_drafts.fetch_add(1, relaxed);
        self.spec_draft_tokens.fetch_add(drafted as u64, relaxed);
        self.spec_accepted_tokens
            .fetch_add(accepted as u64, relaxed);
        for pos in &self.spec_accepted_per_pos[..accepted.min(MAX_DRAFT_TOKENS)] {
            pos.fetch_add(1, relaxed);
        }
        if let Some(len) = drafted
            .checked_sub(1)
            .and_then(|i| self.spec_drafts_per_len.get(i))
        {
            len.fetch_add(1, relaxed);
        }
    }

    /// Speculative decoding so far: `(drafts, draft tokens, accepted tokens)`.
    pub fn spec_counts(&self) -> (u64, u64, u64) {
        let relaxed = Ordering::Relaxed;
        (
            self.spec_drafts.load(relaxed),
            self.spec_draft_tokens.load(relaxed),
            self.spec_accepted_tokens.load(relaxed),
        )
    }

    pub fn observe_ttft(&self, seconds: f64) {
        self.ttft.observe(seconds);
    }

    pub fn observe_inter_token(&self, seconds: f64) {
        self.inter_token.observe(seconds);
    }

    pub fn observe_finished(&self, reason: FinishReason, queue_s: f64, e2e_s: f64) {
        self.finished[reason_index(reason)].fetch_add(1, Ordering::Relaxed);
        self.queue_time.observe(queue_s);
        self.e2e.observe(e2e_s);
    }

    /// Everything in Prometheus' text exposition format.
    pub fn render_prometheus(&self) -> String {
        let g = self.gauges();
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP mlxr:{name} {help}\n# TYPE mlxr:{name} {kind}");
            out.push_str(&value);
        };
        metric(
            "num_requests_running",
            "gauge",
            "Requests in the running batch.",
            format!("mlxr:num_requests_running {}\n", g.running),
        );
        metric(
            "num_requests_waiting",
            "gauge",
            "Requests waiting to be scheduled.",
            format!("mlxr:num_requests_waiting {}\n", g.waiting),
        );
        metric(
            "kv_cache_usage_perc",
            "gauge",
            "Fraction of KV cache blocks in use (1 = full).",
            format!("mlxr:kv_cache_usage_perc {}\n", g.kv_cache_usage),
        );
        let counters = [
            (
                "prefix_cache_queries",
                "Prompt tokens looked up in the prefix cache.",
                g.prefix_cache_queries,
            ),
            (
                "prefix_cache_hits",
                "Prompt tokens served from the prefix cache.",
                g.prefix_cache_hits,
            ),
            (
                "num_preemptions",
                "Sequences preempted (KV recomputed later).",
                g.preemptions,
            ),
            (
                "prompt_tokens",
                "Prompt tokens processed.",
                self.prompt_tokens.load(Ordering::Relaxed),
            ),
            (
                "generation_tokens",
                "Tokens generated.",
                self.generation_tokens.load(Ordering::Relaxed),
            ),
            (
                "spec_decode_num_drafts",
                "Speculative steps of one sequence (with at least one draft token).",
                self.spec_drafts.load(Ordering::Relaxed),
            ),
            (
                "spec_decode_num_draft_tokens",
                "Draft tokens verified.",
                self.spec_draft_tokens.load(Ordering::Relaxed),
            ),
            (
                "spec_decode_num_accepted_tokens",
                "Draft tokens that stood.",
                self.spec_accepted_tokens.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, value) in counters {
            metric(
                &format!("{name}_total"),
                "counter",
                help,
                format!("mlxr:{name}_total {value}\n"),
            );
        }
        let mut per_pos = String::new();
        for (i, n) in self.spec_accepted_per_pos.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n > 0 || i == 0 {
                let _ = writeln!(
                    per_pos,
                    "mlxr:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{i}\"}} {n}"
                );
            }
        }
        metric(
            "spec_decode_num_accepted_tokens_per_pos_total",
            "counter",
            "Drafts whose token at this position stood.",
            per_pos,
        );
        let mut per_len = String::new();
        for (i, n) in self.spec_drafts_per_len.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                let _ = writeln!(
                    per_len,
                    "mlxr:spec_decode_num_drafts_per_len_total{{length=\"{}\"}} {n}",
                    i + 1
                );
            }
        }
        metric(
            "spec_decode_num_drafts_per_len_total",
            "counter",
            "Drafts of this many tokens (the lengths chosen per step).",
            per_len,
        );
        let mut success = String::new();
        for reason in [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::Cancelled,
        ] {
            let n = self.finished[reason_index(reason)].load(Ordering::Relaxed);
            let label = match reason {
                FinishReason::Stop => "stop",
                FinishReason::Length => "length",
                FinishReason::Cancelled => "abort",
            };
            let _ = writeln!(
                success,
                "mlxr:request_success_total{{finished_reason=\"{label}\"}} {n}"
            );
        }
        metric(
            "request_success_total",
            "counter",
            "Finished requests by reason.",
            success,
        );
        let histograms = [
            (
                "time_to_first_token_seconds",
                "Time to first token.",
                &self.ttft,
            ),
            (
                "inter_token_latency_seconds",
                "Time between consecutive output tokens.",
                &self.inter_token,
            ),
            (
                "e2e_request_latency_seconds",
                "End-to-end request latency.",
                &self.e2e,
            ),
            (
                "request_queue_time_seconds",
                "Time requests spent waiting.",
                &self.queue_time,
            ),
        ];
        for (name, help, h) in histograms {
            metric(name, "histogram", help, h.render(&format!("mlxr:{name}")));
        }
        out
    }
}

fn reason_index(reason: FinishReason) -> usize {
    match reason {
        FinishReason::Stop => 0,
        FinishReason::Length => 1,
        FinishReason::Cancelled => 2,
    }
}

#[derive(Default)]
struct Histogram {
    inner: Mutex<HistogramData>,
}

#[derive(Default)]
struct HistogramData {
    /// Per bucket of [`LATENCY_BUCKETS`] (non-cumulative), then +Inf.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&self, value: f64) {
        let mut h = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if h.counts.is_empty() {
            h.counts = vec![0; LATENCY_BUCKETS.len() + 1];
        }
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|&b| value <= b)
            .unwrap_or(LATENCY_BUCKETS.len());
        h.counts[bucket] += 1;
        h.sum += value;
        h.count += 1;
    }

    fn render(&self, name: &str) -> String {
        let h = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let mut cumulative = 0;
        for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
            cumulative += h.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}", h.sum);
        let _ = writeln!(out, "{name}_count {}", h.count);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_cumulative_buckets() {
        let m = EngineMetrics::default();
        m.set_gauges(EngineGauges {
            running: 2,
            waiting: 1,
            kv_cache_usage: 0.5,
            prefix_cache_queries: 100,
            prefix_cache_hits: 32,
            preemptions: 3,
        });
        m.add_generation_tokens(7);
        m.observe_draft(4, 2);
        m.observe_draft(3, 0);
        m.observe_ttft(0.003);
        m.observe_ttft(0.3);
        m.observe_ttft(1000.0);
        m.observe_finished(FinishReason::Length, 0.0, 1.0);
        let text = m.render_prometheus();
        for line in [
            "mlxr:num_requests_running 2",
            "mlxr:num_requests_waiting 1",
            "mlxr:kv_cache_usage_perc 0.5",
            "mlxr:prefix_cache_hits_total 32",
            "mlxr:spec_decode_num_drafts_total 2",
            "mlxr:spec_decode_num_draft_tokens_total 7",
            "mlxr:spec_decode_num_accepted_tokens_total 2",
            "mlxr:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 1",
            "mlxr:spec_decode_num_drafts_per_len_total{length=\"3\"} 1",
            "mlxr:spec_decode_num_drafts_per_len_total{length=\"4\"} 1",
            "mlxr:num_preemptions_total 3",
            "mlxr:generation_tokens_total 7",
            "mlxr:request_success_total{finished_reason=\"length\"} 1",
            "mlxr:request_success_total{finished_reason=\"stop\"} 0",
            "mlxr:time_to_first_token_seconds_bucket{le=\"0.005\"} 1",
            "mlxr:time_to_first_token_seconds_bucket{le=\"0.5\"} 2",
            "mlxr:time_to_first_token_seconds_bucket{le=\"160\"} 2",
            "mlxr:time_to_first_token_seconds_bucket{le=\"+Inf\"} 3",
            "mlxr:time_to_first_token_seconds_count 3",
            "# TYPE mlxr:time_to_first_token_seconds histogram",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing '{line}' in\n{text}"
            );
        }
    }
}
