import { useEffect, useState } from "react";

/** State kept in localStorage as JSON under `key` (the initial value when absent or unreadable). */
export function useStoredState<T>(key: string, initial: T): [T, (value: T | ((old: T) => T)) => void] {
  const [value, setValue] = useState<T>(() => {
    try {
      const stored = localStorage.getItem(key);
      return stored === null ? initial : (JSON.parse(stored) as T);
    } catch {
      return initial;
    }
  });
  useEffect(() => {
    try {
      localStorage.setItem(key, JSON.stringify(value));
    } catch {
      // storage full or disabled: keep the state in memory only
    }
  }, [key, value]);
  return [value, setValue];
}
