import { formatBytes } from "../../lib/format";

const ACRONYMS: Record<string, string> = { api: "API", kv: "KV", num: "number of", seqs: "sequences" };

/** `max_loaded_memory` -> "Max loaded memory", `api_key_set` -> "API key set". */
export function humanize(key: string): string {
  const words = key
    .split("_")
    .map((w) => ACRONYMS[w] ?? w)
    .join(" ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** What an absent (null) setting means. */
const DEFAULTS: Record<string, string> = {
  socket: "none (TCP only)",
  max_loaded_memory: "no limit",
  context_size: "each model's trained context",
  threads: "all cores",
  home: "—",
};

const BYTE_KEYS = /bytes|memory|body_limit/;

/** A setting's value as text: sizes in KiB/MiB/GiB, lists joined, absent as "—". */
export function formatValue(key: string, value: unknown): string {
  if (value === null || value === undefined) return DEFAULTS[key] ?? "—";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "number" && BYTE_KEYS.test(key)) return formatBytes(value);
  if (Array.isArray(value)) return value.length ? value.map(String).join(", ") : "none";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** One section of the configuration as a description list. */
export function ConfigSection({ title, values }: { title: string; values: Record<string, unknown> }) {
  return (
    <section className="panel config-section" aria-label={title}>
      <h3>{title}</h3>
      <dl className="details">
        {Object.entries(values).map(([key, value]) => (
          <div key={key}>
            <dt>{humanize(key)}</dt>
            <dd>{formatValue(key, value)}</dd>
          </div>
        ))}
      </dl>
    </section>
  );
}
