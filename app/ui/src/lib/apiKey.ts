const KEY = "mlxr.apiKey";

/** The API key the user entered (localStorage), or "" when none. */
export function readApiKey(): string {
  return localStorage.getItem(KEY) ?? "";
}

export function writeApiKey(value: string): void {
  if (value) localStorage.setItem(KEY, value);
  else localStorage.removeItem(KEY);
}
