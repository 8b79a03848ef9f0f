import type { ChatOptions } from "../../api/ollama";
import { ToolsField } from "./ToolsField";

type Field = { key: keyof ChatOptions; label: string; step: string; min?: number; max?: number };

const FIELDS: Field[] = [
  { key: "temperature", label: "Temperature", step: "0.05", min: 0, max: 2 },
  { key: "top_p", label: "Top p", step: "0.05", min: 0, max: 1 },
  { key: "top_k", label: "Top k", step: "1", min: 0 },
  { key: "num_predict", label: "Max tokens", step: "1", min: 1 },
  { key: "seed", label: "Seed", step: "1" },
];

/** System prompt, sampling options (Ollama `options`; an empty field = the model's default) and tools. */
export function ChatSettings({
  system,
  options,
  tools,
  onSystem,
  onOptions,
  onTools,
}: {
  system: string;
  options: ChatOptions;
  tools: string;
  onSystem: (s: string) => void;
  onOptions: (o: ChatOptions) => void;
  onTools: (t: string) => void;
}) {
  const set = (key: keyof ChatOptions, text: string) => {
    const next = { ...options };
    const value = Number(text);
    if (text.trim() === "" || !Number.isFinite(value)) delete next[key];
    else next[key] = value;
    onOptions(next);
  };
  return (
    <details className="chat-settings">
      <summary>System prompt and sampling{tools.trim() ? " · tools" : ""}</summary>
      <label className="block">
        System prompt
        <textarea rows={3} value={system} onChange={(e) => onSystem(e.target.value)} />
      </label>
      <div className="option-grid">
        {FIELDS.map((f) => (
          <label key={f.key}>
            {f.label}
            <input
              type="number"
              step={f.step}
              min={f.min}
              max={f.max}
              placeholder="default"
              value={options[f.key] ?? ""}
              onChange={(e) => set(f.key, e.target.value)}
            />
          </label>
        ))}
      </div>
      <ToolsField value={tools} onChange={onTools} />
    </details>
  );
}
