import type { CompletionRequest } from "../../api/openai";

export type ConstraintKind = "none" | "json" | "regex" | "lark";

export interface Constraint {
  kind: ConstraintKind;
  text: string;
}

export const CONSTRAINT_KINDS: { kind: ConstraintKind; label: string }[] = [
  { kind: "none", label: "None" },
  { kind: "json", label: "JSON schema" },
  { kind: "regex", label: "Regular expression" },
  { kind: "lark", label: "Lark grammar" },
];

type Fields = Pick<CompletionRequest, "response_format" | "grammar">;

/** The request fields of a constraint, or why it cannot be sent (invalid JSON, empty text). */
export function constraintFields({ kind, text }: Constraint): { fields: Fields; error: string | null } {
  if (kind === "none") return { fields: {}, error: null };
  if (!text.trim()) return { fields: {}, error: "Write the constraint, or choose None." };
  if (kind === "regex" || kind === "lark") return { fields: { grammar: { type: kind, value: text } }, error: null };
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (e) {
    return { fields: {}, error: `JSON schema: not valid JSON (${e instanceof Error ? e.message : String(e)})` };
  }
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    return { fields: {}, error: "JSON schema: expected a JSON object" };
  }
  return { fields: { response_format: { type: "json_schema", json_schema: { name: "playground", schema } } }, error: null };
}
