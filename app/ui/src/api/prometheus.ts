/** One sample of Prometheus' text format: `name{label="v",...} value`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition; comments and malformed lines are skipped. */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const sample = parseLine(line);
    if (sample) samples.push(sample);
  }
  return samples;
}

function parseLine(line: string): Sample | null {
  const brace = line.indexOf("{");
  const space = line.search(/\s/);
  let name: string;
  let labels: Record<string, string> = {};
  let rest: string;
  if (brace !== -1 && (space === -1 || brace < space)) {
    name = line.slice(0, brace);
    const parsed = parseLabels(line, brace + 1);
    if (!parsed) return null;
    labels = parsed.labels;
    rest = line.slice(parsed.end);
  } else {
    if (space === -1) return null;
    name = line.slice(0, space);
    rest = line.slice(space);
  }
  const valueText = rest.trim().split(/\s+/)[0] ?? "";
  const value = parseValue(valueText);
  if (name === "" || value === null) return null;
  return { name, labels, value };
}

/** Labels from `start` (just after `{`) to the closing `}`; `end` is past it. */
function parseLabels(line: string, start: number): { labels: Record<string, string>; end: number } | null {
  const labels: Record<string, string> = {};
  let i = start;
  for (;;) {
    while (line[i] === " " || line[i] === ",") i++;
    if (line[i] === "}") return { labels, end: i + 1 };
    const eq = line.indexOf("=", i);
    if (eq === -1 || line[eq + 1] !== '"') return null;
    const key = line.slice(i, eq).trim();
    let value = "";
    i = eq + 2;
    while (i < line.length && line[i] !== '"') {
      if (line[i] === "\\" && i + 1 < line.length) {
        const next = line[i + 1];
        value += next === "n" ? "\n" : next;
        i += 2;
      } else {
        value += line[i];
        i++;
      }
    }
    if (i >= line.length) return null;
    labels[key] = value;
    i++;
  }
}

function parseValue(text: string): number | null {
  switch (text) {
    case "+Inf":
      return Infinity;
    case "-Inf":
      return -Infinity;
    case "NaN":
      return NaN;
  }
  if (text === "") return null;
  const value = Number(text);
  return Number.isNaN(value) ? null : value;
}

/** Sum of the samples named `name` whose labels include `match`. */
export function sumOf(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}

/** The distinct values of label `label` among the samples. */
export function labelValues(samples: Sample[], label: string): string[] {
  const values = new Set<string>();
  for (const s of samples) {
    const v = s.labels[label];
    if (v !== undefined) values.add(v);
  }
  return [...values].sort();
}
