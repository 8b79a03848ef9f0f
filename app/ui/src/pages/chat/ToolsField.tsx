import { parseTools } from "./tools";

const EXAMPLE = `[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`;

/** The functions the model may call (a JSON array sent as `tools`); an error is shown under the box. */
export function ToolsField({ value, onChange }: { value: string; onChange: (text: string) => void }) {
  const { error } = parseTools(value);
  return (
    <div className="tools-field">
      <label className="block">
        Tools (JSON array; empty = none)
        <textarea
          rows={4}
          className="code-input"
          spellCheck={false}
          placeholder={EXAMPLE}
          value={value}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? "tools-error" : undefined}
          onChange={(e) => onChange(e.target.value)}
        />
      </label>
      {error && (
        <span id="tools-error" className="field-error">
          {error}
        </span>
      )}
    </div>
  );
}
