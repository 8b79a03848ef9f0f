import { useState, type DragEvent, type FormEvent } from "react";
import { ErrorMessage } from "../../components/ErrorMessage";
import { formatBytes } from "../../lib/format";
import { useImport, type ImportState } from "./useImport";

/** A model name from a file name: `Qwen2.5-0.5B.Q4_K_M.gguf` -> `qwen2.5-0.5b.q4_k_m`. */
export function nameOf(fileName: string): string {
  return fileName
    .replace(/\.gguf$/i, "")
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[-.]+|[-.]+$/g, "");
}

/** Imports a GGUF file of this computer: dropped on the panel or chosen, hashed, uploaded, registered under a name. */
export function ImportForm({ onImported }: { onImported: () => void }) {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState("");
  const [refused, setRefused] = useState<string | null>(null);
  const [over, setOver] = useState(false);
  const { state, busy, run, cancel } = useImport(onImported);

  const pick = (picked: File | undefined) => {
    if (!picked || busy) return;
    if (!/\.gguf$/i.test(picked.name)) {
      setRefused(`${picked.name} is not a .gguf file (a Hugging Face folder is pulled by its path or hf.co name)`);
      return;
    }
    setRefused(null);
    setFile(picked);
    setName(nameOf(picked.name));
  };
  const drop = (e: DragEvent) => {
    e.preventDefault();
    setOver(false);
    pick(e.dataTransfer.files[0]);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (file && name.trim() && !busy) void run(file, name.trim());
  };
  return (
    <section
      className={over ? "panel drop-zone over" : "panel drop-zone"}
      aria-labelledby="import-heading"
      onDragOver={(e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={drop}
    >
      <h2 id="import-heading">Import a GGUF file</h2>
      <form aria-label="Import" className="row" onSubmit={submit}>
        <label>
          GGUF file
          <input type="file" accept=".gguf" disabled={busy} onChange={(e) => pick(e.target.files?.[0])} />
        </label>
        <label className="grow">
          Import as
          <input value={name} onChange={(e) => setName(e.target.value)} disabled={busy} placeholder="a model name" />
        </label>
        {busy ? (
          <button type="button" className="danger" onClick={cancel}>
            Cancel import
          </button>
        ) : (
          <button type="submit" className="primary" disabled={!file || !name.trim()}>
            Import
          </button>
        )}
      </form>
      <p className="hint">{file ? `${file.name}, ${formatBytes(file.size)}` : "…or drop a .gguf file on this panel."}</p>
      <ErrorMessage message={refused} />
      <ImportProgress state={state} />
    </section>
  );
}

function ImportProgress({ state }: { state: ImportState }) {
  switch (state.phase) {
    case "hashing":
    case "uploading": {
      const label = state.phase === "hashing" ? "Hashing" : "Upload";
      return (
        <div className="pull-progress">
          <progress aria-label={`${label} progress`} max={state.total || undefined} value={state.total ? state.done : undefined} />
          <p role="status">
            {state.phase === "hashing" ? "computing SHA-256" : "uploading"} — {formatBytes(state.done)} of {formatBytes(state.total)}
          </p>
        </div>
      );
    }
    case "creating":
      return <p role="status">registering the model</p>;
    case "done":
      return <p role="status">Imported {state.model}.</p>;
    case "cancelled":
      return <p role="status">Import of {state.model} cancelled.</p>;
    case "failed":
      return <ErrorMessage message={`Import of ${state.model} failed: ${state.error}`} />;
    case "idle":
      return null;
  }
}
