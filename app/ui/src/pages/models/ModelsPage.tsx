import { useState } from "react";
import { describe } from "../../api/client";
import { copyModel, deleteModel } from "../../api/ollama";
import { useModels } from "../../api/useModels";
import { ErrorMessage } from "../../components/ErrorMessage";
import { ModelDetails } from "./ModelDetails";
import { ModelTable } from "./ModelTable";
import { ImportForm } from "./ImportForm";
import { PullForm } from "./PullForm";

export function ModelsPage() {
  const { models, error: listError, reload } = useModels();
  const [error, setError] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);

  const act = async (action: () => Promise<void>) => {
    try {
      await action();
      setError(null);
    } catch (e) {
      setError(describe(e));
    }
    await reload();
  };
  const copy = (name: string) => {
    const destination = window.prompt(`Copy ${name} to the name:`, `${name}-copy`);
    if (destination?.trim()) void act(() => copyModel(name, destination.trim()));
  };
  const remove = (name: string) => {
    if (!window.confirm(`Delete ${name}? Its files are removed when no other model uses them.`)) return;
    if (selected === name) setSelected(null);
    void act(() => deleteModel(name));
  };

  return (
    <div className="page">
      <h1>Models</h1>
      <PullForm onPulled={() => void reload()} />
      <ImportForm onImported={() => void reload()} />
      <ErrorMessage message={error ?? listError} onDismiss={error ? () => setError(null) : undefined} />
      <section className="panel" aria-labelledby="installed-heading">
        <div className="row">
          <h2 id="installed-heading" className="grow">
            Installed
          </h2>
          <button type="button" onClick={() => void reload()}>
            Refresh
          </button>
        </div>
        {models === null ? !listError && <p>Loading…</p> : <ModelTable models={models} onDetails={setSelected} onCopy={copy} onDelete={remove} />}
      </section>
      {selected && <ModelDetails name={selected} onClose={() => setSelected(null)} onChanged={() => void reload()} />}
    </div>
  );
}
