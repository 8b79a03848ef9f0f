import type { ChatMessage, ToolCall, ToolDefinition } from "../../api/ollama";

/** The Tools box: empty = no tools, else a JSON array of `{type: "function", function: {name, ...}}`. */
export function parseTools(text: string): { tools?: ToolDefinition[]; error: string | null } {
  if (!text.trim()) return { error: null };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { error: `Tools: not valid JSON (${e instanceof Error ? e.message : String(e)})` };
  }
  if (!Array.isArray(value)) return { error: "Tools: expected a JSON array of tool definitions" };
  for (const [i, tool] of value.entries()) {
    const fn = (tool as { function?: { name?: unknown } } | null)?.function;
    if (typeof tool !== "object" || tool === null || Array.isArray(tool)) {
      return { error: `Tools: item ${i + 1} is not an object` };
    }
    if (typeof fn?.name !== "string" || !fn.name) {
      return { error: `Tools: item ${i + 1} has no function.name` };
    }
  }
  return { tools: value.map((t: ToolDefinition) => ({ ...t, type: t.type ?? "function" })), error: null };
}

/** The calls of the last assistant turn not yet answered by the tool turns after it. */
export function pendingToolCalls(messages: ChatMessage[]): ToolCall[] {
  let answered = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === "tool") answered++;
    else if (m.role === "assistant") return (m.tool_calls ?? []).slice(answered);
    else return [];
  }
  return [];
}

/** A call's arguments as indented JSON (a string of JSON, as OpenAI sends, is parsed first). */
export function formatArguments(args: ToolCall["function"]["arguments"] | string): string {
  if (typeof args !== "string") return JSON.stringify(args ?? {}, null, 2);
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}
