import { useState } from "react";
import { labelValues } from "../../api/prometheus";
import { ErrorMessage } from "../../components/ErrorMessage";
import { LineChart } from "../../components/LineChart";
import { formatNumber } from "../../lib/format";
import { derivePoint, type Point } from "./derive";
import { useMetricsHistory } from "./useMetricsHistory";

const ALL = "";

const CHARTS: { title: string; value: (p: Point) => number | null; unit: string; digits: number }[] = [
  { title: "Generated tokens/s", value: (p) => p.tokensPerSecond, unit: "", digits: 1 },
  { title: "Time to first token (mean)", value: (p) => p.ttftMs, unit: " ms", digits: 0 },
  { title: "Inter-token latency (mean)", value: (p) => p.interTokenMs, unit: " ms", digits: 1 },
  { title: "Running requests", value: (p) => p.running, unit: "", digits: 0 },
  { title: "Waiting requests", value: (p) => p.waiting, unit: "", digits: 0 },
  { title: "KV-cache usage", value: (p) => p.kvUsagePercent, unit: " %", digits: 1 },
  { title: "Prefix-cache hit rate", value: (p) => p.prefixHitRatePercent, unit: " %", digits: 1 },
  { title: "Draft tokens accepted", value: (p) => p.draftAcceptancePercent, unit: " %", digits: 1 },
  { title: "Mean accepted length", value: (p) => p.meanAcceptedLength, unit: " tokens", digits: 2 },
];

/** Live charts from GET /metrics (every 2 s); rates and means are per interval. */
export function MetricsPage() {
  const { snapshots, error } = useMetricsHistory();
  const [model, setModel] = useState(ALL);
  const latest = snapshots[snapshots.length - 1];
  const models = latest ? labelValues(latest.samples, "model") : [];
  const points = snapshots.slice(1).map((s, i) => derivePoint(snapshots[i] ?? null, s, model === ALL ? null : model));
  return (
    <div className="page">
      <div className="row">
        <h1 className="grow">Metrics</h1>
        <label>
          Model
          <select value={model} onChange={(e) => setModel(e.target.value)}>
            <option value={ALL}>All loaded models</option>
            {models.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorMessage message={error} />
      {latest && models.length === 0 && (
        <p className="empty">No model is loaded: metrics appear once a model serves a request.</p>
      )}
      <div className="charts">
        {CHARTS.map((c) => (
          <LineChart
            key={c.title}
            title={c.title}
            values={points.map(c.value)}
            format={(v) => (v === null ? "—" : `${formatNumber(v, c.digits)}${c.unit}`)}
          />
        ))}
      </div>
      <p className="note">
        Sampled every 2 s from <code>/metrics</code>. KV-cache usage with all models is the highest one; tokens/s, hit
        rate, latencies and speculative decoding's acceptance are over each 2 s interval (— when nothing happened).
        The mean accepted length is the tokens one verifying step yields: 1 + accepted drafts per draft.
      </p>
    </div>
  );
}
