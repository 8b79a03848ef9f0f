import { useState } from "react";
import { readApiKey, writeApiKey } from "../lib/apiKey";

/** The daemon's API key (stored in this browser's localStorage), sent as a Bearer token. */
export function ApiKeyField() {
  const [value, setValue] = useState(readApiKey);
  return (
    <label className="api-key">
      API key
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
