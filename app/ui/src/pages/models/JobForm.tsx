import { useState, type FormEvent, type ReactNode } from "react";
import type { Job, JobRequest } from "mlxr";
import { ErrorMessage } from "../../components/ErrorMessage";
import { useJob, type JobState } from "./useJob";

export interface JobFormProps {
  /** The run's name: the form's heading, its button and its messages ("Quantize", "Convert"). */
  what: string;
  heading: string;
  typeLabel: string;
  types: string[];
  /** The new model's suggested name for a type. */
  nameFor: (type: string) => string;
  request: (model: string, type: string) => JobRequest;
  /** The message once the new model is registered. */
  done: (job: Job) => string;
  onDone: () => void;
  /** More fields of the request, disabled while the job runs. */
  extra?: (running: boolean) => ReactNode;
}

/** A job of the daemon making a new model from one (a quantize, a convert): type, new name, progress, cancel. */
export function JobForm({ what, heading, typeLabel, types, nameFor, request, done, onDone, extra }: JobFormProps) {
  const [type, setType] = useState(types[0] ?? "");
  const [name, setName] = useState(() => nameFor(types[0] ?? ""));
  const { state, job, running, start, cancel } = useJob(onDone);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (name.trim() && !running) void start(request(name.trim(), type));
  };
  const pickType = (t: string) => {
    setType(t);
    setName(nameFor(t));
  };
  return (
    <form aria-label={heading} onSubmit={submit}>
      <h3>{heading}</h3>
      <div className="row">
        <label>
          {typeLabel}
          <select value={type} onChange={(e) => pickType(e.target.value)} disabled={running}>
            {types.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </label>
        <label className="grow">
          New model name
          <input value={name} onChange={(e) => setName(e.target.value)} disabled={running} />
        </label>
        {extra?.(running)}
        {running && job ? (
          <button type="button" className="danger" onClick={() => void cancel(job.id)}>
            Cancel {what.toLowerCase()}
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!name.trim()}>
            {what}
          </button>
        )}
      </div>
      <JobProgress state={state} what={what} done={done} />
    </form>
  );
}

/** A job's bar of tensors and status line while it runs, then how it ended. */
function JobProgress({ state, what, done }: { state: JobState; what: string; done: (job: Job) => string }) {
  if (state.phase === "failed") return <ErrorMessage message={state.error} />;
  if (state.phase !== "job") return null;
  const { job } = state;
  const { completed, total, status } = job.progress ?? {};
  const known = total !== undefined && total > 0;
  switch (job.status) {
    case "running":
    case "registering":
      return (
        <div className="pull-progress">
          <progress aria-label={`${what} progress`} max={known ? total : undefined} value={known ? completed : undefined} />
          <p role="status">
            {status ?? "starting"}
            {known && ` — ${completed ?? 0} of ${total} tensors`}
          </p>
        </div>
      );
    case "success":
      return <p role="status">{done(job)}</p>;
    case "cancelled":
      return <p role="status">{`${what} to ${job.model} cancelled.`}</p>;
    case "error":
      return <ErrorMessage message={`${what} to ${job.model} failed: ${job.error ?? "unknown error"}`} />;
  }
}
