import { sumOf, type Sample } from "../../api/prometheus";

/** One scrape of /metrics: when (ms) and what. */
export interface Snapshot {
  t: number;
  samples: Sample[];
}

/** The charted values at one scrape; `null` = no data in that interval. */
export interface Point {
  t: number;
  running: number;
  waiting: number;
  kvUsagePercent: number;
  tokensPerSecond: number | null;
  prefixHitRatePercent: number | null;
  ttftMs: number | null;
  interTokenMs: number | null;
  /** Speculative decoding: draft tokens accepted of those verified. */
  draftAcceptancePercent: number | null;
  /** Tokens a verifying step yields, on average: 1 + accepted / drafts (vLLM's mean acceptance length). */
  meanAcceptedLength: number | null;
}

const P = "mlxr:";

/**
 * The point for `cur`, with rates over the interval since `prev`.
 * `model` null = every model: gauges and counters summed, KV usage the highest.
 */
export function derivePoint(prev: Snapshot | null, cur: Snapshot, model: string | null): Point {
  const match: Record<string, string> = model === null ? {} : { model };
  const now = (name: string) => sumOf(cur.samples, P + name, match);
  const delta = (name: string): number | null => {
    if (!prev) return null;
    const d = now(name) - sumOf(prev.samples, P + name, match);
    // A counter going down means the model was reloaded: no rate this time.
    return d < 0 ? null : d;
  };
  const ratio = (num: number | null, den: number | null, scale: number) =>
    num === null || den === null || den === 0 ? null : (num / den) * scale;
  const seconds = prev ? (cur.t - prev.t) / 1000 : 0;
  const generated = delta("generation_tokens_total");
  const drafts = delta("spec_decode_num_drafts_total");
  const accepted = delta("spec_decode_num_accepted_tokens_total");
  return {
    t: cur.t,
    running: now("num_requests_running"),
    waiting: now("num_requests_waiting"),
    kvUsagePercent: kvUsage(cur.samples, match) * 100,
    tokensPerSecond: generated === null || seconds <= 0 ? null : generated / seconds,
    prefixHitRatePercent: ratio(delta("prefix_cache_hits_total"), delta("prefix_cache_queries_total"), 100),
    ttftMs: ratio(
      delta("time_to_first_token_seconds_sum"),
      delta("time_to_first_token_seconds_count"),
      1000,
    ),
    interTokenMs: ratio(
      delta("inter_token_latency_seconds_sum"),
      delta("inter_token_latency_seconds_count"),
      1000,
    ),
    draftAcceptancePercent: ratio(accepted, delta("spec_decode_num_draft_tokens_total"), 100),
    meanAcceptedLength: accepted === null || !drafts ? null : 1 + accepted / drafts,
  };
}

function kvUsage(samples: Sample[], match: Record<string, string>): number {
  let highest = 0;
  for (const s of samples) {
    if (s.name !== P + "kv_cache_usage_perc") continue;
    if (match.model !== undefined && s.labels.model !== match.model) continue;
    highest = Math.max(highest, s.value);
  }
  return highest;
}
