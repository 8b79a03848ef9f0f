import { Markdown } from "../../components/Markdown";
import { formatNumber } from "../../lib/format";
import type { StoredMessage } from "./conversations";
import { ToolCallView } from "./ToolCallView";

function roleLabel({ role, tool_name }: StoredMessage): string {
  if (role === "user") return "You";
  if (role === "tool") return `Tool result ${tool_name ?? ""}`.trim();
  return "Assistant";
}

export function MessageView({ message, streaming = false }: { message: StoredMessage; streaming?: boolean }) {
  const { role, content, stats, stopped, error, tool_calls } = message;
  const label = roleLabel(message);
  return (
    <article className={`message ${role}`} aria-label={label} aria-busy={streaming}>
      <div className="message-role">{role === "tool" ? <>Tool result <code>{message.tool_name}</code></> : label}</div>
      {role === "user" && <p className="user-text">{content}</p>}
      {role === "tool" && <pre className="tool-output">{content}</pre>}
      {role === "assistant" && (content || !tool_calls?.length) && <Markdown text={content} />}
      {tool_calls?.map((call, i) => <ToolCallView key={i} call={call} />)}
      {stats && (
        <p className="stats" aria-label="Reply statistics">
          {stats.tokens} tokens · {formatNumber(stats.tokensPerSecond)} tokens/s · time to first token{" "}
          {stats.ttftMs === null ? "—" : `${Math.round(stats.ttftMs)} ms`}
        </p>
      )}
      {stopped && !error && <p className="stats">Stopped.</p>}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
    </article>
  );
}
