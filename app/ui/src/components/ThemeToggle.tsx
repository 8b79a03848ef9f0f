import { useTheme, type Theme } from "../lib/theme";

const NEXT: Record<Theme, Theme> = { system: "light", light: "dark", dark: "system" };

/** Cycles system → light → dark; "system" follows the OS setting. */
export function ThemeToggle() {
  const [theme, setTheme] = useTheme();
  return (
    <button
      type="button"
      onClick={() => setTheme(NEXT[theme])}
      aria-label={`Theme: ${theme}. Switch to ${NEXT[theme]}`}
      title="Switch theme"
    >
      Theme: {theme}
    </button>
  );
}
