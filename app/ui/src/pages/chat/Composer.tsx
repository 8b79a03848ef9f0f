import { useState, type FormEvent, type KeyboardEvent } from "react";

/** The message box: Enter sends, Shift+Enter is a new line; Stop while a reply streams. */
export function Composer({
  streaming,
  disabled,
  onSend,
  onStop,
}: {
  streaming: boolean;
  disabled: boolean;
  onSend: (text: string) => void;
  onStop: () => void;
}) {
  const [text, setText] = useState("");
  const submit = (e?: FormEvent) => {
    e?.preventDefault();
    if (streaming || disabled || !text.trim()) return;
    onSend(text);
    setText("");
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) submit(e);
  };
  return (
    <form className="composer" onSubmit={submit}>
      <label className="visually-hidden" htmlFor="chat-input">
        Message
      </label>
      <textarea
        id="chat-input"
        rows={3}
        placeholder="Send a message (Enter sends, Shift+Enter for a new line)"
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
      />
      {streaming ? (
        <button type="button" className="danger" onClick={onStop}>
          Stop
        </button>
      ) : (
        <button type="submit" className="primary" disabled={disabled || !text.trim()}>
          Send
        </button>
      )}
    </form>
  );
}
