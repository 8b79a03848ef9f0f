import { useEffect, useState, type FormEvent } from "react";
import { describe } from "../../api/client";
import { updateConfig, type ServerConfig } from "../../api/mlxr";
import { ErrorMessage } from "../../components/ErrorMessage";

/** The one setting that changes while the daemon runs: the default keep-alive. */
export function KeepAliveForm({ current, onSaved }: { current: string; onSaved: (config: ServerConfig) => void }) {
  const [value, setValue] = useState(current);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    setValue(current);
  }, [current]);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    try {
      onSaved(await updateConfig({ keep_alive: value.trim() }));
      setError(null);
      setSaved(true);
    } catch (e) {
      setError(describe(e));
    }
  };

  return (
    <section className="panel" aria-labelledby="keep-alive-title">
      <h2 id="keep-alive-title">Default keep-alive</h2>
      <form className="row" onSubmit={save}>
        <label>
          Keep models loaded after a request for
          <input
            value={value}
            onChange={(e) => {
              setValue(e.target.value);
              setSaved(false);
            }}
            placeholder="5m"
            aria-describedby="keep-alive-help"
          />
        </label>
        <button type="submit" disabled={!value.trim() || value.trim() === current}>
          Save
        </button>
        {saved && (
          <span className="ok" role="status">
            Saved: {current}.
          </span>
        )}
      </form>
      <p className="note" id="keep-alive-help">
        A duration such as 30s, 5m or 1h; 0 unloads after each request, -1 keeps models loaded. Applies to later
        requests that name no <code>keep_alive</code>, until the daemon restarts.
      </p>
      <ErrorMessage message={error} onDismiss={() => setError(null)} />
    </section>
  );
}
