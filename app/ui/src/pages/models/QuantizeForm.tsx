import { useState, type FormEvent } from "react";
import { ErrorMessage } from "../../components/ErrorMessage";
import { useQuantizeJob } from "./useQuantizeJob";

/** The types offered (any `mlxr quantize --type` name is accepted by the daemon). */
const TYPES = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q3_K_M", "Q2_K"];

/** Quantizes a model of float weights into a new model, as a job of the daemon with progress. */
export function QuantizeForm({ from, onQuantized }: { from: string; onQuantized: () => void }) {
  const base = from.replace(/:latest$/, "");
  const [type, setType] = useState("Q4_K_M");
  const [name, setName] = useState(`${base}-q4_k_m`);
  const { state, start, cancel } = useQuantizeJob(onQuantized);
  const job = state.phase === "job" ? state.job : null;
  const running = job?.status === "running" || job?.status === "registering";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (name.trim() && !running) void start({ model: name.trim(), from, quantize: type });
  };
  const pickType = (t: string) => {
    setType(t);
    setName(`${base}-${t.toLowerCase()}`);
  };
  const { completed, total, status } = job?.progress ?? {};
  const known = total !== undefined && total > 0;
  return (
    <form aria-label="Quantize" onSubmit={submit}>
      <h3>Quantize</h3>
      <div className="row">
        <label>
          Type
          <select value={type} onChange={(e) => pickType(e.target.value)} disabled={running}>
            {TYPES.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </label>
        <label className="grow">
          New model name
          <input value={name} onChange={(e) => setName(e.target.value)} disabled={running} />
        </label>
        {running && job ? (
          <button type="button" className="danger" onClick={() => void cancel(job.id)}>
            Cancel quantize
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!name.trim()}>
            Quantize
          </button>
        )}
      </div>
      {running && (
        <div className="pull-progress">
          <progress aria-label="Quantize progress" max={known ? total : undefined} value={known ? completed : undefined} />
          <p role="status">
            {status ?? "starting"}
            {known && ` — ${completed ?? 0} of ${total} tensors`}
          </p>
        </div>
      )}
      {job?.status === "success" && <p role="status">Quantized {from} to {job.model} ({job.quantize}).</p>}
      {job?.status === "cancelled" && <p role="status">Quantize to {job.model} cancelled.</p>}
      {job?.status === "error" && <ErrorMessage message={`Quantize to ${job.model} failed: ${job.error ?? "unknown error"}`} />}
      {state.phase === "failed" && <ErrorMessage message={state.error} />}
    </form>
  );
}
