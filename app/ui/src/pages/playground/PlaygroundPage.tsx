import { useModels } from "../../api/useModels";
import type { ModelSummary } from "../../api/ollama";
import { ErrorMessage } from "../../components/ErrorMessage";
import { CompletionPanel } from "./CompletionPanel";
import { EmbeddingsPanel } from "./EmbeddingsPanel";

/** Embedding models are BERT-family (the only encoders the daemon runs). */
export function isEmbeddingModel(m: ModelSummary): boolean {
  const family = (m.details.family ?? "").toLowerCase();
  return family === "bert" || /minilm|embed/i.test(m.name);
}

export function PlaygroundPage() {
  const { models, error } = useModels();
  const generators = (models ?? []).filter((m) => !isEmbeddingModel(m));
  const embedders = (models ?? []).filter(isEmbeddingModel);
  return (
    <div className="page">
      <h1>Playground</h1>
      <ErrorMessage message={error} />
      <CompletionPanel models={models} defaultModel={generators[0]?.name ?? models?.[0]?.name ?? ""} />
      <EmbeddingsPanel models={models} defaultModel={embedders[0]?.name ?? models?.[0]?.name ?? ""} />
    </div>
  );
}
