import type { ChatMessage, ChatOptions } from "../../api/ollama";
import { useStoredState } from "../../lib/useStoredState";

/** Speed of one reply: from the final chunk (eval_*) and measured by the browser (TTFT). */
export interface ReplyStats {
  tokens: number;
  tokensPerSecond: number | null;
  ttftMs: number | null;
}

export interface StoredMessage extends ChatMessage {
  stats?: ReplyStats;
  /** The reply ended early: stopped by the user, or an error (its text). */
  stopped?: boolean;
  error?: string;
}

export interface Conversation {
  id: string;
  title: string;
  model: string;
  system: string;
  options: ChatOptions;
  /** The Tools box's text (a JSON array); absent in conversations saved before tools. */
  tools?: string;
  messages: StoredMessage[];
  updatedAt: number;
}

export const STORAGE_KEY = "mlxr.conversations";

/** A new conversation with `model`, keeping `from`'s system prompt, options and tools. */
export function newConversation(model: string, from?: Conversation): Conversation {
  return {
    id: crypto.randomUUID(),
    title: "New chat",
    model,
    system: from?.system ?? "",
    options: from?.options ?? {},
    tools: from?.tools ?? "",
    messages: [],
    updatedAt: Date.now(),
  };
}

/** The messages sent to /api/chat: the system prompt first, then the turns. */
export function requestMessages(c: Conversation): ChatMessage[] {
  const turns = c.messages.map(({ role, content, tool_calls, tool_name }): ChatMessage => ({
    role,
    content,
    ...(role === "assistant" && tool_calls?.length ? { tool_calls } : {}),
    ...(role === "tool" && tool_name ? { tool_name } : {}),
  }));
  return c.system.trim() ? [{ role: "system", content: c.system }, ...turns] : turns;
}

/** A title from the first user message. */
export function titleFrom(text: string): string {
  const line = text.trim().split("\n")[0] ?? "";
  return line.length > 40 ? `${line.slice(0, 40)}…` : line || "New chat";
}

/** Every conversation, newest first, persisted in localStorage. */
export function useConversations() {
  const [list, setList] = useStoredState<Conversation[]>(STORAGE_KEY, []);
  const update = (id: string, change: (c: Conversation) => Conversation) =>
    setList((old) =>
      old
        .map((c) => (c.id === id ? { ...change(c), updatedAt: Date.now() } : c))
        .sort((a, b) => b.updatedAt - a.updatedAt),
    );
  const add = (c: Conversation) => setList((old) => [c, ...old]);
  const remove = (id: string) => setList((old) => old.filter((c) => c.id !== id));
  return { list, update, add, remove };
}
