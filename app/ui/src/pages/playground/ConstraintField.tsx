import { CONSTRAINT_KINDS, constraintFields, type Constraint, type ConstraintKind } from "./constraint";

const PLACEHOLDERS: Record<ConstraintKind, string> = {
  none: "",
  json: '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}',
  regex: "(yes|no)\\.",
  lark: 'start: "yes" | "no"',
};

/** Constrained output: a JSON schema (`response_format`) or MLXR's `grammar` (regex or Lark). */
export function ConstraintField({ value, onChange }: { value: Constraint; onChange: (c: Constraint) => void }) {
  const { error } = constraintFields(value);
  const label = CONSTRAINT_KINDS.find((k) => k.kind === value.kind)?.label ?? "";
  return (
    <fieldset className="constraint">
      <legend>Constraint</legend>
      <label>
        Constraint type
        <select value={value.kind} onChange={(e) => onChange({ ...value, kind: e.target.value as ConstraintKind })}>
          {CONSTRAINT_KINDS.map((k) => (
            <option key={k.kind} value={k.kind}>
              {k.label}
            </option>
          ))}
        </select>
      </label>
      {value.kind !== "none" && (
        <label className="block">
          {label}
          <textarea
            rows={3}
            className="code-input"
            spellCheck={false}
            placeholder={PLACEHOLDERS[value.kind]}
            value={value.text}
            aria-invalid={error ? true : undefined}
            aria-describedby={error ? "constraint-error" : undefined}
            onChange={(e) => onChange({ ...value, text: e.target.value })}
          />
        </label>
      )}
      {value.kind !== "none" && error && (
        <span id="constraint-error" className="field-error">
          {error}
        </span>
      )}
    </fieldset>
  );
}
