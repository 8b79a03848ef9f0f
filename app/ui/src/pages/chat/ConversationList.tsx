import type { Conversation } from "./conversations";

export function ConversationList({
  list,
  currentId,
  onSelect,
  onNew,
  onRename,
  onDelete,
}: {
  list: Conversation[];
  currentId: string | null;
  onSelect: (id: string) => void;
  onNew: () => void;
  onRename: (id: string, title: string) => void;
  onDelete: (id: string) => void;
}) {
  const rename = (c: Conversation) => {
    const title = window.prompt("Rename the conversation", c.title);
    if (title?.trim()) onRename(c.id, title.trim());
  };
  const remove = (c: Conversation) => {
    if (window.confirm(`Delete the conversation "${c.title}"?`)) onDelete(c.id);
  };
  return (
    <aside className="conversations" aria-label="Conversations">
      <button type="button" className="primary" onClick={onNew}>
        New chat
      </button>
      <ul>
        {list.map((c) => (
          <li key={c.id} className={c.id === currentId ? "current" : undefined}>
            <button
              type="button"
              className="conversation-title"
              aria-current={c.id === currentId ? "true" : undefined}
              onClick={() => onSelect(c.id)}
            >
              {c.title}
            </button>
            <button type="button" className="icon" aria-label={`Rename ${c.title}`} onClick={() => rename(c)}>
              ✎
            </button>
            <button type="button" className="icon" aria-label={`Delete ${c.title}`} onClick={() => remove(c)}>
              ✕
            </button>
          </li>
        ))}
      </ul>
    </aside>
  );
}
