import type { ModelSummary } from "../../api/ollama";

/** The model select; keeps a stored choice that is no longer installed visible. */
export function ModelPicker({
  models,
  value,
  onChange,
}: {
  models: ModelSummary[] | null;
  value: string;
  onChange: (model: string) => void;
}) {
  const names = (models ?? []).map((m) => m.name);
  if (value && !names.includes(value)) names.unshift(value);
  return (
    <label>
      Model
      <select value={value} onChange={(e) => onChange(e.target.value)} disabled={models === null}>
        {names.length === 0 && <option value="">{models === null ? "Loading…" : "No models installed"}</option>}
        {names.map((n) => (
          <option key={n} value={n}>
            {n}
          </option>
        ))}
      </select>
    </label>
  );
}
