import { useEffect, useRef, useState } from "react";
import { useModels } from "../../api/useModels";
import { ErrorMessage } from "../../components/ErrorMessage";
import { ChatSettings } from "./ChatSettings";
import { Composer } from "./Composer";
import { ConversationList } from "./ConversationList";
import {
  newConversation,
  requestMessages,
  titleFrom,
  useConversations,
  type Conversation,
  type StoredMessage,
} from "./conversations";
import { MessageView } from "./MessageView";
import { ModelPicker } from "./ModelPicker";
import { parseTools, pendingToolCalls } from "./tools";
import { ToolResultForm } from "./ToolResultForm";
import { useChatStream } from "./useChatStream";

export function ChatPage() {
  const { models, error: modelsError } = useModels();
  const conversations = useConversations();
  const [currentId, setCurrentId] = useState<string | null>(() => conversations.list[0]?.id ?? null);
  const current = conversations.list.find((c) => c.id === currentId) ?? null;
  const replyTo = useRef<string | null>(null);
  const stream = useChatStream((reply) => {
    const id = replyTo.current;
    if (id) conversations.update(id, (c) => ({ ...c, messages: [...c.messages, reply] }));
  });
  const bottom = useRef<HTMLDivElement>(null);

  const firstModel = models?.[0]?.name ?? "";
  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: "end" });
  }, [stream.draft, current?.messages.length]);

  const create = (model = current?.model || firstModel): Conversation => {
    const c = newConversation(model, current ?? undefined);
    conversations.add(c);
    setCurrentId(c.id);
    return c;
  };
  const change = (edit: (c: Conversation) => Conversation) => {
    if (current) conversations.update(current.id, edit);
  };
  const pickModel = (model: string) => {
    if (current) change((c) => ({ ...c, model }));
    else create(model);
  };
  const tools = parseTools(current?.tools ?? "");
  const append = (base: Conversation, message: StoredMessage, reply: boolean) => {
    const updated: Conversation = {
      ...base,
      model: base.model || firstModel,
      title: base.messages.length === 0 && message.role === "user" ? titleFrom(message.content) : base.title,
      messages: [...base.messages, message],
    };
    conversations.update(base.id, () => updated);
    if (!reply) return;
    replyTo.current = base.id;
    void stream.start(updated.model, requestMessages(updated), updated.options, parseTools(updated.tools ?? "").tools);
  };
  const send = (text: string) => append(current ?? create(), { role: "user", content: text }, true);
  const pending = current && !stream.streaming ? pendingToolCalls(current.messages) : [];
  const answer = (content: string) => {
    const call = pending[0];
    if (current && call) append(current, { role: "tool", content, tool_name: call.function.name }, pending.length === 1);
  };

  const model = current?.model || firstModel;
  return (
    <div className="chat-page">
      <ConversationList
        list={conversations.list}
        currentId={currentId}
        onSelect={(id) => !stream.streaming && setCurrentId(id)}
        onNew={() => !stream.streaming && create()}
        onRename={(id, title) => conversations.update(id, (c) => ({ ...c, title }))}
        onDelete={(id) => {
          if (stream.streaming && id === replyTo.current) stream.stop();
          conversations.remove(id);
          if (id === currentId) setCurrentId(null);
        }}
      />
      <section className="chat-main" aria-label="Chat">
        <div className="chat-toolbar">
          <ModelPicker models={models} value={model} onChange={pickModel} />
        </div>
        <ErrorMessage message={modelsError} />
        {current && (
          <ChatSettings
            system={current.system}
            options={current.options}
            tools={current.tools ?? ""}
            onSystem={(system) => change((c) => ({ ...c, system }))}
            onOptions={(options) => change((c) => ({ ...c, options }))}
            onTools={(text) => change((c) => ({ ...c, tools: text }))}
          />
        )}
        <div className="messages" aria-live="polite">
          {current?.messages.map((m, i) => <MessageView key={i} message={m} />)}
          {pending[0] && (
            <ToolResultForm key={current?.messages.length} call={pending[0]} disabled={!!tools.error} onSend={answer} />
          )}
          {stream.draft && <MessageView message={stream.draft} streaming />}
          {!current?.messages.length && !stream.draft && (
            <p className="empty">Pick a model and send a message. Conversations are kept in this browser.</p>
          )}
          <div ref={bottom} />
        </div>
        <Composer streaming={stream.streaming} disabled={!model || !!tools.error} onSend={send} onStop={stream.stop} />
      </section>
    </div>
  );
}
