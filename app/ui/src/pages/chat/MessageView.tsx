import { Markdown } from "../../components/Markdown";
import { formatNumber } from "../../lib/format";
import type { StoredMessage } from "./conversations";

export function MessageView({ message, streaming = false }: { message: StoredMessage; streaming?: boolean }) {
  const { role, content, stats, stopped, error } = message;
  return (
    <article className={`message ${role}`} aria-label={role === "user" ? "You" : "Assistant"} aria-busy={streaming}>
      <div className="message-role">{role === "user" ? "You" : "Assistant"}</div>
      {role === "user" ? <p className="user-text">{content}</p> : <Markdown text={content} />}
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
