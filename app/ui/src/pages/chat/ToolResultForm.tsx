import { useState, type FormEvent } from "react";
import type { ToolCall } from "../../api/ollama";

/** The user answers a tool call by hand: the text goes back as a `tool` message. */
export function ToolResultForm({
  call,
  disabled,
  onSend,
}: {
  call: ToolCall;
  disabled: boolean;
  onSend: (content: string) => void;
}) {
  const [text, setText] = useState("");
  const name = call.function.name;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (disabled) return;
    onSend(text);
    setText("");
  };
  return (
    <form className="tool-result-form" aria-label={`Answer tool call ${name}`} onSubmit={submit}>
      <label className="block">
        Result of {name}
        <textarea rows={2} className="code-input" value={text} onChange={(e) => setText(e.target.value)} />
      </label>
      <button type="submit" className="primary" disabled={disabled}>
        Send result
      </button>
    </form>
  );
}
