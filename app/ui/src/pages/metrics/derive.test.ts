import { describe, expect, it } from "vitest";
import { parsePrometheus } from "../../api/prometheus";
import { derivePoint } from "./derive";

const scrape = (t: number, text: string) => ({ t, samples: parsePrometheus(text) });

const A = scrape(
  0,
  `mlxr:num_requests_running{model="m"} 1
mlxr:kv_cache_usage_perc{model="m"} 0.1
mlxr:kv_cache_usage_perc{model="n"} 0.3
mlxr:generation_tokens_total{model="m"} 100
mlxr:prefix_cache_queries_total{model="m"} 10
mlxr:prefix_cache_hits_total{model="m"} 0
mlxr:time_to_first_token_seconds_sum{model="m"} 1
mlxr:time_to_first_token_seconds_count{model="m"} 2
mlxr:inter_token_latency_seconds_sum{model="m"} 1
mlxr:inter_token_latency_seconds_count{model="m"} 100
mlxr:spec_decode_num_drafts_total{model="m"} 10
mlxr:spec_decode_num_draft_tokens_total{model="m"} 40
mlxr:spec_decode_num_accepted_tokens_total{model="m"} 20`,
);
const B = scrape(
  2000,
  `mlxr:num_requests_running{model="m"} 2
mlxr:num_requests_waiting{model="m"} 1
mlxr:kv_cache_usage_perc{model="m"} 0.5
mlxr:kv_cache_usage_perc{model="n"} 0.3
mlxr:generation_tokens_total{model="m"} 140
mlxr:prefix_cache_queries_total{model="m"} 50
mlxr:prefix_cache_hits_total{model="m"} 30
mlxr:time_to_first_token_seconds_sum{model="m"} 1.5
mlxr:time_to_first_token_seconds_count{model="m"} 4
mlxr:inter_token_latency_seconds_sum{model="m"} 1.8
mlxr:inter_token_latency_seconds_count{model="m"} 140
mlxr:spec_decode_num_drafts_total{model="m"} 14
mlxr:spec_decode_num_draft_tokens_total{model="m"} 56
mlxr:spec_decode_num_accepted_tokens_total{model="m"} 30`,
);

describe("derivePoint", () => {
  it("computes rates and interval means from counter deltas", () => {
    const p = derivePoint(A, B, "m");
    expect(p.running).toBe(2);
    expect(p.waiting).toBe(1);
    expect(p.kvUsagePercent).toBeCloseTo(50);
    expect(p.tokensPerSecond).toBeCloseTo(20);
    expect(p.prefixHitRatePercent).toBeCloseTo(75);
    expect(p.ttftMs).toBeCloseTo(250);
    expect(p.interTokenMs).toBeCloseTo(20);
    expect(p.draftAcceptancePercent).toBeCloseTo(62.5);
    expect(p.meanAcceptedLength).toBeCloseTo(3.5);
  });

  it("has no rates for the first scrape, after a reset, or without traffic", () => {
    expect(derivePoint(null, A, "m").tokensPerSecond).toBeNull();
    expect(derivePoint(B, { ...A, t: 4000 }, "m").tokensPerSecond).toBeNull();
    expect(derivePoint(B, { ...B, t: 4000 }, "m").ttftMs).toBeNull();
    expect(derivePoint(B, { ...B, t: 4000 }, "m").meanAcceptedLength).toBeNull();
  });

  it("takes the highest KV usage across models", () => {
    expect(derivePoint(A, A, null).kvUsagePercent).toBeCloseTo(30);
  });
});
