import { useEffect, useState } from "react";
import { useApiKey, writeApiKey } from "../lib/apiKey";

/**
 * The daemon's API key (stored in this browser's localStorage), sent as a
 * Bearer token. Every instance shows the same stored key.
 */
export function ApiKeyField({ label = "API key", className = "api-key" }: { label?: string; className?: string }) {
  const stored = useApiKey();
  const [value, setValue] = useState(stored);
  useEffect(() => {
    setValue((old) => (old.trim() === stored ? old : stored));
  }, [stored]);
  return (
    <label className={className}>
      {label}
      <input
        type="password"
        autoComplete="off"
        placeholder="none"
        value={value}
        onChange={(e) => {
          setValue(e.target.value);
          writeApiKey(e.target.value.trim());
        }}
      />
    </label>
  );
}
