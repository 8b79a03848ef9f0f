import { JobForm } from "./JobForm";

/** `mlxr convert --outtype`s: auto keeps F16 or BF16 weights' type; 1-D tensors and norms stay F32. */
const OUT_TYPES = ["auto", "f16", "bf16", "f32", "q8_0"];

/** Converts a Hugging Face or MLX folder model to a GGUF model, as a job of the daemon with progress. */
export function ConvertForm({ from, onConverted }: { from: string; onConverted: () => void }) {
  const base = from.replace(/:latest$/, "");
  return (
    <JobForm
      what="Convert"
      heading="Convert to GGUF"
      typeLabel="Out type"
      types={OUT_TYPES}
      nameFor={(t) => (t === "auto" ? `${base}-gguf` : `${base}-${t}`)}
      request={(model, outtype) => ({ kind: "convert", model, from, outtype })}
      done={(j) => `Converted ${from} to ${j.model} (${j.outtype}).`}
      onDone={onConverted}
    />
  );
}
