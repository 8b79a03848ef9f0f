import { useRef, useState } from "react";
import { describe, isAbort } from "../../api/client";
import { streamChat, type ChatMessage, type ChatOptions, type ToolDefinition } from "../../api/ollama";
import type { StoredMessage } from "./conversations";

/**
 * One streamed reply at a time: `draft` grows as tokens and tool calls arrive; `onFinish`
 * gets the final message (complete, stopped or failed). `stop` aborts the
 * fetch, which makes the daemon abort the request.
 */
export function useChatStream(onFinish: (reply: StoredMessage) => void) {
  const [draft, setDraft] = useState<StoredMessage | null>(null);
  const controller = useRef<AbortController | null>(null);

  const start = async (model: string, messages: ChatMessage[], options: ChatOptions, tools?: ToolDefinition[]) => {
    const abort = new AbortController();
    controller.current = abort;
    const started = performance.now();
    let reply: StoredMessage = { role: "assistant", content: "" };
    let ttftMs: number | null = null;
    setDraft(reply);
    try {
      const chunks = await streamChat({ model, messages, options, ...(tools ? { tools } : {}) }, abort.signal);
      for await (const chunk of chunks) {
        const piece = chunk.message?.content ?? "";
        const calls = chunk.message?.tool_calls ?? [];
        if (piece || calls.length) ttftMs ??= performance.now() - started;
        if (piece) reply = { ...reply, content: reply.content + piece };
        if (calls.length) reply = { ...reply, tool_calls: [...(reply.tool_calls ?? []), ...calls] };
        if (chunk.done) {
          const tokens = chunk.eval_count ?? 0;
          const seconds = (chunk.eval_duration ?? 0) / 1e9;
          reply = { ...reply, stats: { tokens, tokensPerSecond: seconds > 0 ? tokens / seconds : null, ttftMs } };
        }
        setDraft(reply);
      }
    } catch (e) {
      reply = isAbort(e) ? { ...reply, stopped: true } : { ...reply, stopped: true, error: describe(e) };
    } finally {
      controller.current = null;
      setDraft(null);
      onFinish(reply);
    }
  };

  const stop = () => controller.current?.abort();

  return { draft, streaming: draft !== null, start, stop };
}
