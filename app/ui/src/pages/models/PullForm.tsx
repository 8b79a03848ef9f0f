import { useState, type FormEvent } from "react";
import { ErrorMessage } from "../../components/ErrorMessage";
import { formatBytes } from "../../lib/format";
import { usePull } from "./usePull";

/** Pull a model by name (e.g. smollm2:135m, hf.co/…, an https URL or a path on the server). */
export function PullForm({ onPulled }: { onPulled: () => void }) {
  const [name, setName] = useState("");
  const { state, pull, cancel } = usePull(onPulled);
  const pulling = state.phase === "pulling";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (name.trim() && !pulling) void pull(name.trim());
  };
  return (
    <section className="panel" aria-labelledby="pull-heading">
      <h2 id="pull-heading">Pull a model</h2>
      <form className="row" onSubmit={submit}>
        <label className="grow">
          Model name
          <input
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="smollm2:135m, hf.co/org/repo:file.gguf, https://… or a path"
          />
        </label>
        {pulling ? (
          <button type="button" className="danger" onClick={cancel}>
            Cancel
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!name.trim()}>
            Pull
          </button>
        )}
      </form>
      {pulling && <PullProgressView status={state.progress?.status ?? "starting"} total={state.progress?.total} completed={state.progress?.completed} />}
      {state.phase === "done" && <p role="status">Pulled {state.model}.</p>}
      {state.phase === "cancelled" && <p role="status">Pull of {state.model} cancelled.</p>}
      {state.phase === "failed" && <ErrorMessage message={`Pull of ${state.model} failed: ${state.error}`} />}
    </section>
  );
}

function PullProgressView({ status, total, completed }: { status: string; total?: number; completed?: number }) {
  const known = total !== undefined && total > 0;
  const done = Math.min(completed ?? 0, total ?? 0);
  return (
    <div className="pull-progress">
      <progress aria-label="Pull progress" max={known ? total : undefined} value={known ? done : undefined} />
      <p role="status">
        {status}
        {known && ` — ${formatBytes(done)} of ${formatBytes(total)} (${Math.floor((done / total) * 100)}%)`}
      </p>
    </div>
  );
}
