import { useEffect } from "react";
import { useStoredState } from "./useStoredState";

/** "system" follows the OS (prefers-color-scheme); the others force it. */
export type Theme = "system" | "light" | "dark";

export function useTheme(): [Theme, (t: Theme) => void] {
  const [theme, setTheme] = useStoredState<Theme>("mlxr.theme", "system");
  useEffect(() => {
    const root = document.documentElement;
    if (theme === "system") delete root.dataset.theme;
    else root.dataset.theme = theme;
  }, [theme]);
  return [theme, setTheme];
}
