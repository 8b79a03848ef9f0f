import type { ModelSummary } from "../../api/ollama";
import { formatBytes, formatDate } from "../../lib/format";

export function ModelTable({
  models,
  onDetails,
  onCopy,
  onDelete,
}: {
  models: ModelSummary[];
  onDetails: (name: string) => void;
  onCopy: (name: string) => void;
  onDelete: (name: string) => void;
}) {
  if (models.length === 0) return <p className="empty">No models installed. Pull one above.</p>;
  return (
    <table className="models">
      <caption className="visually-hidden">Installed models</caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Size</th>
          <th scope="col">Family</th>
          <th scope="col">Parameters</th>
          <th scope="col">Quantization</th>
          <th scope="col">Modified</th>
          <th scope="col">Actions</th>
        </tr>
      </thead>
      <tbody>
        {models.map((m) => (
          <tr key={m.name}>
            <th scope="row">{m.name}</th>
            <td>{formatBytes(m.size)}</td>
            <td>{m.details.family ?? "—"}</td>
            <td>{m.details.parameter_size || "—"}</td>
            <td>{m.details.quantization_level || "—"}</td>
            <td>{formatDate(m.modified_at)}</td>
            <td className="actions">
              <button type="button" onClick={() => onDetails(m.name)} aria-label={`Details of ${m.name}`}>
                Details
              </button>
              <button type="button" onClick={() => onCopy(m.name)} aria-label={`Copy ${m.name}`}>
                Copy
              </button>
              <button type="button" className="danger" onClick={() => onDelete(m.name)} aria-label={`Delete ${m.name}`}>
                Delete
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
