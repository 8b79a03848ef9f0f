import { useEffect, useState } from "react";
import { describe } from "../../api/client";
import { showModel, type ShowResponse } from "../../api/ollama";
import { ErrorMessage } from "../../components/ErrorMessage";
import { ConvertForm, type ConvertTarget } from "./ConvertForm";
import { QuantizeForm } from "./QuantizeForm";

/** POST /api/show for one model: details, parameters, template, modelfile. */
export function ModelDetails({ name, onClose, onChanged }: { name: string; onClose: () => void; onChanged: () => void }) {
  const [info, setInfo] = useState<ShowResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    setInfo(null);
    setError(null);
    showModel(name).then(
      (i) => live && setInfo(i),
      (e: unknown) => live && setError(describe(e)),
    );
    return () => {
      live = false;
    };
  }, [name]);
  const target = info && convertsTo(info);
  return (
    <section className="panel" aria-labelledby="details-heading">
      <div className="row">
        <h2 id="details-heading" className="grow">
          {name}
        </h2>
        <button type="button" onClick={onClose}>
          Close details
        </button>
      </div>
      <ErrorMessage message={error} />
      {!info && !error && <p>Loading…</p>}
      {info && (
        <>
          <dl className="details">
            {Object.entries(info.details ?? {}).map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{Array.isArray(v) ? v.join(", ") : String(v ?? "—")}</dd>
              </div>
            ))}
          </dl>
          <Block title="Parameters" text={info.parameters} />
          <Block title="System prompt" text={info.system} />
          <Block title="Template" text={info.template} />
          <Block title="Modelfile" text={info.modelfile} />
          {target && (
            <>
              <QuantizeForm key={`q-${name}`} from={name} onQuantized={onChanged} />
              <ConvertForm key={`c-${name}`} from={name} to={target} onConverted={onChanged} />
            </>
          )}
        </>
      )}
    </section>
  );
}

/** What a model's weights convert to: a GGUF to a folder, a decoder folder to GGUF; an embedding model to nothing. */
function convertsTo(info: ShowResponse): ConvertTarget | null {
  if (info.capabilities?.includes("embedding")) return null;
  if (info.details?.format === "gguf") return "folder";
  return info.details?.format === "safetensors" ? "gguf" : null;
}

function Block({ title, text }: { title: string; text?: string }) {
  if (!text) return null;
  return (
    <details open={title !== "Modelfile"}>
      <summary>{title}</summary>
      <pre>{text}</pre>
    </details>
  );
}
