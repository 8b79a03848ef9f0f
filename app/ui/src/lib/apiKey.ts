import { useSyncExternalStore } from "react";

const KEY = "mlxr.apiKey";
const listeners = new Set<() => void>();

/** The API key the user entered (localStorage), or "" when none. */
export function readApiKey(): string {
  try {
    return localStorage.getItem(KEY) ?? "";
  } catch {
    return "";
  }
}

/** Stores the key ("" removes it) and tells every `useApiKey` user. */
export function writeApiKey(value: string): void {
  try {
    if (value) localStorage.setItem(KEY, value);
    else localStorage.removeItem(KEY);
  } catch {
    // storage disabled: the key cannot be kept
  }
  listeners.forEach((l) => l());
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The stored key, re-rendering when any field changes it. */
export function useApiKey(): string {
  return useSyncExternalStore(subscribe, readApiKey);
}
