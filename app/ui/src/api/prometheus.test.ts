import { describe, expect, it } from "vitest";
import { labelValues, parsePrometheus, sumOf } from "./prometheus";

const TEXT = `# HELP mlxr:num_requests_running Requests being generated.
# TYPE mlxr:num_requests_running gauge
mlxr:num_requests_running{model="smollm2"} 2
mlxr:num_requests_running{model="gemma3"} 1
mlxr:kv_cache_usage_perc{model="smollm2"} 0.25
mlxr:request_success_total{finished_reason="stop",model="smollm2"} 7
mlxr:time_to_first_token_seconds_bucket{le="+Inf",model="smollm2"} 3
mlxr:time_to_first_token_seconds_sum{model="smollm2"} 0.375
weird{path="a\\"b\\\\c, d=e"} 1e3
plain_metric 4.5 1700000000000
broken{model="x" 1
no_value
`;

describe("parsePrometheus", () => {
  const samples = parsePrometheus(TEXT);

  it("parses names, labels and values, skipping comments and bad lines", () => {
    expect(samples).toHaveLength(8);
    expect(samples[0]).toEqual({ name: "mlxr:num_requests_running", labels: { model: "smollm2" }, value: 2 });
    expect(samples[3]).toEqual({
      name: "mlxr:request_success_total",
      labels: { finished_reason: "stop", model: "smollm2" },
      value: 7,
    });
    expect(samples[4]?.labels.le).toBe("+Inf");
  });

  it("unescapes label values and reads exponents, timestamps, +Inf", () => {
    expect(samples[6]).toEqual({ name: "weird", labels: { path: 'a"b\\c, d=e' }, value: 1000 });
    expect(samples[7]).toEqual({ name: "plain_metric", labels: {}, value: 4.5 });
    expect(parsePrometheus("x +Inf\ny NaN")[0]?.value).toBe(Infinity);
  });

  it("sums by name and labels", () => {
    expect(sumOf(samples, "mlxr:num_requests_running")).toBe(3);
    expect(sumOf(samples, "mlxr:num_requests_running", { model: "gemma3" })).toBe(1);
    expect(sumOf(samples, "absent")).toBe(0);
  });

  it("lists label values", () => {
    expect(labelValues(samples, "model")).toEqual(["gemma3", "smollm2"]);
  });
});
