import { useState } from "react";
import { JobForm } from "./JobForm";

/** What a model converts to: a folder model to GGUF, a GGUF model to a Hugging Face folder. */
export type ConvertTarget = "gguf" | "folder";

/**
 * `mlxr convert --outtype`s of each target: for GGUF, auto keeps F16 or
 * BF16 weights' type (1-D tensors and norms stay F32); a folder holds
 * dequantized floats (auto is F32).
 */
const OUT_TYPES: Record<ConvertTarget, string[]> = {
  gguf: ["auto", "f16", "bf16", "f32", "q8_0"],
  folder: ["f32", "f16", "bf16"],
};

/** Converts a model to GGUF or to a folder, as a job of the daemon with progress. */
export function ConvertForm({ from, to, onConverted }: { from: string; to: ConvertTarget; onConverted: () => void }) {
  const base = from.replace(/:latest$/, "");
  const suffix = to === "gguf" ? "gguf" : "hf";
  // llama.cpp's name for a tokenizer the converter does not recognise (`mlxr convert --tokenizer-pre`).
  const [tokenizerPre, setTokenizerPre] = useState("");
  const pre = tokenizerPre.trim();
  return (
    <JobForm
      what="Convert"
      heading={to === "gguf" ? "Convert to GGUF" : "Convert to a Hugging Face folder"}
      typeLabel="Out type"
      types={OUT_TYPES[to]}
      nameFor={(t) => (t === "auto" ? `${base}-${suffix}` : `${base}-${suffix}-${t}`)}
      request={(model, outtype) => ({ kind: "convert", model, from, outtype, ...(pre ? { tokenizer_pre: pre } : {}) })}
      done={(j) => `Converted ${from} to ${j.model} (${j.outtype}).`}
      onDone={onConverted}
      extra={(running) =>
        to === "gguf" && (
          <label>
            Pre-tokenizer
            <input value={tokenizerPre} onChange={(e) => setTokenizerPre(e.target.value)} disabled={running} placeholder="optional: llama-bpe, qwen2…" />
          </label>
        )
      }
    />
  );
}
