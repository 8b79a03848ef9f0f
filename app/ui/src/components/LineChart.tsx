const WIDTH = 300;
const HEIGHT = 80;

/** A small SVG line chart of the latest values; `null` leaves a gap. */
export function LineChart({
  title,
  values,
  format,
  min = 0,
}: {
  title: string;
  values: (number | null)[];
  format: (v: number | null) => string;
  min?: number;
}) {
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v));
  const max = Math.max(min + 1e-9, ...known);
  const step = values.length > 1 ? WIDTH / (values.length - 1) : WIDTH;
  const y = (v: number) => HEIGHT - ((v - min) / (max - min)) * (HEIGHT - 4) - 2;
  const segments: string[] = [];
  let current = "";
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) {
      if (current) segments.push(current);
      current = "";
      return;
    }
    current += `${current ? " L" : "M"}${(i * step).toFixed(1)},${y(v).toFixed(1)}`;
  });
  if (current) segments.push(current);
  const latest = values.length ? (values[values.length - 1] ?? null) : null;
  const dot = latest !== null && Number.isFinite(latest);
  return (
    <figure className="chart">
      <figcaption>
        <span>{title}</span>
        <strong aria-label={`${title}: latest value`}>{format(latest)}</strong>
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={`${title} over time, max ${format(known.length ? max : null)}`}>
        {segments.map((d, i) => (
          <path key={i} d={d} />
        ))}
        {dot && <circle cx={(values.length - 1) * step} cy={y(latest)} r={2.5} />}
      </svg>
    </figure>
  );
}
