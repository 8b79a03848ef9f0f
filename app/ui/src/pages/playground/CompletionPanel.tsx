import { useRef, useState, type FormEvent } from "react";
import { describe, isAbort } from "../../api/client";
import type { ModelSummary } from "../../api/ollama";
import { complete, type CompletionResponse } from "../../api/openai";
import { ErrorMessage } from "../../components/ErrorMessage";
import { ModelPicker } from "../chat/ModelPicker";
import { constraintFields, type Constraint } from "./constraint";
import { ConstraintField } from "./ConstraintField";
import { TokenLogprobs } from "./TokenLogprobs";

/** Raw completion (`POST /v1/completions`, no chat template) with per-token logprobs, optionally constrained. */
export function CompletionPanel({ models, defaultModel }: { models: ModelSummary[] | null; defaultModel: string }) {
  const [model, setModel] = useState("");
  const [prompt, setPrompt] = useState("The capital of France is");
  const [maxTokens, setMaxTokens] = useState(16);
  const [temperature, setTemperature] = useState(0);
  const [alternatives, setAlternatives] = useState(5);
  const [constraint, setConstraint] = useState<Constraint>({ kind: "none", text: "" });
  const [result, setResult] = useState<CompletionResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [running, setRunning] = useState(false);
  const controller = useRef<AbortController | null>(null);
  const chosen = model || defaultModel;
  const constrained = constraintFields(constraint);

  const run = async (e: FormEvent) => {
    e.preventDefault();
    if (constrained.error) return;
    const abort = new AbortController();
    controller.current = abort;
    setRunning(true);
    setError(null);
    try {
      setResult(
        await complete(
          { model: chosen, prompt, max_tokens: maxTokens, temperature, logprobs: alternatives, ...constrained.fields },
          abort.signal,
        ),
      );
    } catch (e) {
      if (!isAbort(e)) setError(describe(e));
    } finally {
      controller.current = null;
      setRunning(false);
    }
  };

  const choice = result?.choices[0];
  return (
    <section className="panel" aria-labelledby="completion-title">
      <h2 id="completion-title">Completion with logprobs</h2>
      <form onSubmit={run}>
        <div className="row">
          <ModelPicker models={models} value={chosen} onChange={setModel} />
          <label>
            Max tokens
            <input type="number" min={1} max={512} value={maxTokens} onChange={(e) => setMaxTokens(Number(e.target.value))} />
          </label>
          <label>
            Temperature
            <input
              type="number"
              min={0}
              max={2}
              step={0.1}
              value={temperature}
              onChange={(e) => setTemperature(Number(e.target.value))}
            />
          </label>
          <label>
            Alternatives per token
            <input
              type="number"
              min={0}
              max={20}
              value={alternatives}
              onChange={(e) => setAlternatives(Number(e.target.value))}
            />
          </label>
        </div>
        <label className="block">
          Prompt
          <textarea rows={3} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
        </label>
        <ConstraintField value={constraint} onChange={setConstraint} />
        <div className="row actions-row">
          <button type="submit" className="primary" disabled={running || !chosen || !prompt || !!constrained.error}>
            Complete
          </button>
          {running && (
            <button type="button" onClick={() => controller.current?.abort()}>
              Cancel
            </button>
          )}
          <span className="note">Raw text, no chat template; temperature 0 is greedy.</span>
        </div>
      </form>
      <ErrorMessage message={error} onDismiss={() => setError(null)} />
      {choice && (
        <div className="completion" aria-label="Completion result">
          <p className="completion-text">
            <span className="prompt-echo">{prompt}</span>
            <strong>{choice.text}</strong>
          </p>
          {choice.logprobs ? <TokenLogprobs logprobs={choice.logprobs} /> : <p className="note">No logprobs returned.</p>}
          <p className="stats">
            {result?.usage?.completion_tokens ?? choice.logprobs?.tokens.length ?? 0} tokens, finish reason{" "}
            {choice.finish_reason ?? "—"}
          </p>
        </div>
      )}
    </section>
  );
}
