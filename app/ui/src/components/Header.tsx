import { Link, ROUTES, type Route } from "../lib/router";
import { ApiKeyField } from "./ApiKeyField";
import { ThemeToggle } from "./ThemeToggle";

const LABELS: Record<Route, string> = {
  chat: "Chat",
  playground: "Playground",
  models: "Models",
  metrics: "Metrics",
  settings: "Settings",
  logs: "Logs",
};

export function Header({ route }: { route: Route | null }) {
  return (
    <header className="header">
      <span className="brand">MLXR</span>
      <nav aria-label="Pages">
        {ROUTES.map((r) => (
          <Link key={r} to={r} aria-current={r === route ? "page" : undefined}>
            {LABELS[r]}
          </Link>
        ))}
      </nav>
      <div className="header-tools">
        <ApiKeyField />
        <ThemeToggle />
      </div>
    </header>
  );
}
