import type { ComponentType } from "react";
import { Header } from "./components/Header";
import { useRoute, type Route } from "./lib/router";
import { ChatPage } from "./pages/chat/ChatPage";
import { LogsPage } from "./pages/logs/LogsPage";
import { MetricsPage } from "./pages/metrics/MetricsPage";
import { ModelsPage } from "./pages/models/ModelsPage";
import { PlaygroundPage } from "./pages/playground/PlaygroundPage";
import { SettingsPage } from "./pages/settings/SettingsPage";

const PAGES: Record<Route, ComponentType> = {
  chat: ChatPage,
  models: ModelsPage,
  metrics: MetricsPage,
  playground: PlaygroundPage,
  settings: SettingsPage,
  logs: LogsPage,
};

export function App() {
  const route = useRoute();
  const Page = route ? PAGES[route] : null;
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <Header route={route} />
      <main id="main">
        {Page ? (
          <Page />
        ) : (
          <div className="page">
            <h1>Page not found</h1>
            <p>There is no page at {window.location.pathname}. Use the navigation above.</p>
          </div>
        )}
      </main>
    </>
  );
}
