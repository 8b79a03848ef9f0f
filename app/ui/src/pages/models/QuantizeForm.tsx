import { JobForm } from "./JobForm";

/** The types offered (any `mlxr quantize --type` name is accepted by the daemon). */
const TYPES = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q3_K_M", "Q2_K"];

/** Quantizes a GGUF model of float weights into a new model, as a job of the daemon with progress. */
export function QuantizeForm({ from, onQuantized }: { from: string; onQuantized: () => void }) {
  const base = from.replace(/:latest$/, "");
  return (
    <JobForm
      what="Quantize"
      heading="Quantize"
      typeLabel="Type"
      types={TYPES}
      nameFor={(t) => `${base}-${t.toLowerCase()}`}
      request={(model, quantize) => ({ model, from, quantize })}
      done={(j) => `Quantized ${from} to ${j.model} (${j.quantize}).`}
      onDone={onQuantized}
    />
  );
}
