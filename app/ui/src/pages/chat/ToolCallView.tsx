import type { ToolCall } from "../../api/ollama";
import { formatArguments } from "./tools";

/** One function call the model made: its name and arguments. */
export function ToolCallView({ call }: { call: ToolCall }) {
  const { name, arguments: args } = call.function;
  return (
    <section className="tool-block" aria-label={`Tool call ${name}`}>
      <div className="tool-title">
        Tool call <code>{name}</code>
      </div>
      <pre>{formatArguments(args)}</pre>
    </section>
  );
}
