import { useState, type CSSProperties, type FormEvent } from "react";
import { describe } from "../../api/client";
import type { ModelSummary } from "../../api/ollama";
import { embed } from "../../api/openai";
import { ErrorMessage } from "../../components/ErrorMessage";
import { ModelPicker } from "../chat/ModelPicker";
import { cosineMatrix } from "./cosine";

const SAMPLE = ["The cat sits on the mat.", "A kitten is resting on a rug.", "Stock markets fell sharply today."];

/** A readable message, with what to do when the model cannot embed. */
function explain(message: string): string {
  if (/does not support embeddings|not found/i.test(message)) {
    return `${message}. Embeddings need an embedding model such as all-minilm: pull it on the Models page (mlxr pull all-minilm) and pick it here.`;
  }
  return message;
}

/** Embeddings of several texts (`POST /v1/embeddings`) and their cosine-similarity matrix. */
export function EmbeddingsPanel({ models, defaultModel }: { models: ModelSummary[] | null; defaultModel: string }) {
  const [model, setModel] = useState("");
  const [text, setText] = useState(SAMPLE.join("\n"));
  const [result, setResult] = useState<{ texts: string[]; matrix: number[][]; dims: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [running, setRunning] = useState(false);
  const chosen = model || defaultModel;
  const texts = text
    .split("\n")
    .map((t) => t.trim())
    .filter(Boolean);

  const run = async (e: FormEvent) => {
    e.preventDefault();
    setRunning(true);
    setError(null);
    try {
      const vectors = await embed(chosen, texts);
      setResult({ texts, matrix: cosineMatrix(vectors), dims: vectors[0]?.length ?? 0 });
    } catch (e) {
      setResult(null);
      setError(explain(describe(e)));
    } finally {
      setRunning(false);
    }
  };

  return (
    <section className="panel" aria-labelledby="embeddings-title">
      <h2 id="embeddings-title">Embeddings: cosine similarity</h2>
      <form onSubmit={run}>
        <div className="row">
          <ModelPicker models={models} value={chosen} onChange={setModel} />
        </div>
        <label className="block">
          Texts (one per line)
          <textarea rows={4} value={text} onChange={(e) => setText(e.target.value)} />
        </label>
        <div className="row actions-row">
          <button type="submit" className="primary" disabled={running || !chosen || texts.length < 2}>
            Compare
          </button>
          <span className="note">{texts.length} texts; at least two.</span>
        </div>
      </form>
      <ErrorMessage message={error} onDismiss={() => setError(null)} />
      {result && (
        <div className="similarity">
          <table aria-label="Cosine similarity matrix">
            <thead>
              <tr>
                <td />
                {result.texts.map((_, j) => (
                  <th key={j} scope="col" title={result.texts[j]}>
                    {j + 1}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {result.matrix.map((row, i) => (
                <tr key={i}>
                  <th scope="row">
                    <span className="index">{i + 1}</span> {result.texts[i]}
                  </th>
                  {row.map((v, j) => (
                    <td key={j} className="sim" style={{ "--sim": Math.max(0, v).toFixed(3) } as CSSProperties}>
                      {v.toFixed(3)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
          <p className="stats">{result.dims} dimensions; 1 = same direction, 0 = unrelated.</p>
        </div>
      )}
    </section>
  );
}
