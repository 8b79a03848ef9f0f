import { useCallback, useEffect, useState } from "react";
import { describe } from "../../api/client";
import { getConfig, type ServerConfig } from "../../api/mlxr";
import { ApiKeyField } from "../../components/ApiKeyField";
import { ErrorMessage } from "../../components/ErrorMessage";
import { useApiKey } from "../../lib/apiKey";
import { ConfigSection } from "./ConfigSection";
import { KeepAliveForm } from "./KeepAliveForm";

const TITLES: Record<string, string> = {
  listen: "Listening",
  security: "Security",
  models: "Models",
  engine: "Engine",
  kv_cache: "KV cache",
  logs: "Logs",
};

/** The API key entry and the daemon's effective configuration (`GET /api/mlxr/config`); the default keep-alive can change. */
export function SettingsPage() {
  const apiKey = useApiKey();
  const [config, setConfig] = useState<ServerConfig | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      setConfig(await getConfig());
      setError(null);
    } catch (e) {
      setConfig(null);
      setError(describe(e));
    }
  }, []);
  useEffect(() => {
    void load();
  }, [load, apiKey]);

  const sections = Object.entries(config ?? {}).filter(
    (entry): entry is [string, Record<string, unknown>] => typeof entry[1] === "object" && entry[1] !== null,
  );
  return (
    <div className="page">
      <h1>Settings</h1>
      <section className="panel" aria-labelledby="key-title">
        <h2 id="key-title">API key</h2>
        <p className="note">
          The daemon's <code>--api-key</code> / <code>MLXR_API_KEY</code>. Kept in this browser's localStorage and sent
          as <code>Authorization: Bearer …</code> with every request (the header's field is the same key).
        </p>
        <div className="row">
          <ApiKeyField label="API key for this browser" className="" />
          <button type="button" onClick={() => void load()}>
            Check the key
          </button>
          {config && <span className="ok">Connected{config.version ? ` to mlxr ${String(config.version)}` : ""}.</span>}
        </div>
      </section>
      <ErrorMessage message={error} />
      {config && (
        <>
          <KeepAliveForm current={keepAlive(config)} onSaved={setConfig} />
          <h2>Server configuration</h2>
          <p className="note">
            How this <code>mlxr serve</code> runs (flags, environment, <code>--config</code> file). Besides the
            keep-alive above, change it by restarting the daemon with other flags; see <code>mlxr serve --help</code>.
          </p>
          <div className="config-grid">
            {sections.map(([name, values]) => (
              <ConfigSection key={name} title={TITLES[name] ?? name} values={values} />
            ))}
          </div>
        </>
      )}
    </div>
  );
}

function keepAlive(config: ServerConfig): string {
  const models = config.models as { keep_alive?: unknown } | undefined;
  return typeof models?.keep_alive === "string" ? models.keep_alive : "";
}
