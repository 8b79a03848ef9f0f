import { useEffect, useRef, useState } from "react";
import type { LogLine } from "../../api/mlxr";
import { ErrorMessage } from "../../components/ErrorMessage";
import { useLogStream, type Status } from "./useLogStream";

const LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"] as const;
const STATUS_TEXT: Record<Status, string> = { connecting: "Connecting…", live: "Live", error: "Disconnected" };

function atLeast(line: LogLine, level: string): boolean {
  return LEVELS.indexOf(line.level) >= LEVELS.indexOf(level as (typeof LEVELS)[number]);
}

/** A live tail of the daemon's log (`GET /api/mlxr/logs`, SSE) with pause, filters and auto-scroll. */
export function LogsPage() {
  const [paused, setPaused] = useState(false);
  const [autoScroll, setAutoScroll] = useState(true);
  const [level, setLevel] = useState("TRACE");
  const [filter, setFilter] = useState("");
  const { lines, held, skipped, status, error, clear } = useLogStream(paused);
  const box = useRef<HTMLDivElement>(null);
  const needle = filter.trim().toLowerCase();
  const shown = lines.filter(
    (l) => atLeast(l, level) && (!needle || `${l.target} ${l.message}`.toLowerCase().includes(needle)),
  );

  useEffect(() => {
    const el = box.current;
    if (el && autoScroll) el.scrollTop = el.scrollHeight;
  }, [shown.length, autoScroll]);

  return (
    <div className="page logs-page">
      <div className="row title-row">
        <h1 className="grow">Logs</h1>
        <span className={`badge ${status}`} role="status">
          {paused ? `Paused${held ? ` — ${held} new` : ""}` : STATUS_TEXT[status]}
        </span>
      </div>
      <div className="row toolbar">
        <button type="button" className={paused ? "primary" : undefined} onClick={() => setPaused(!paused)}>
          {paused ? "Resume" : "Pause"}
        </button>
        <button type="button" onClick={clear}>
          Clear
        </button>
        <label className="checkbox">
          <input type="checkbox" checked={autoScroll} onChange={(e) => setAutoScroll(e.target.checked)} />
          Auto-scroll
        </label>
        <label>
          Level
          <select value={level} onChange={(e) => setLevel(e.target.value)}>
            {LEVELS.map((l) => (
              <option key={l} value={l}>
                {l === "TRACE" ? "All" : `${l} and above`}
              </option>
            ))}
          </select>
        </label>
        <label className="grow">
          Filter
          <input type="search" value={filter} placeholder="text in the line" onChange={(e) => setFilter(e.target.value)} />
        </label>
      </div>
      <ErrorMessage message={error} />
      {skipped > 0 && <p className="note">{skipped} lines were logged too fast to show.</p>}
      <div className="log-box" ref={box} role="log" aria-label="Server log" tabIndex={0}>
        {shown.length === 0 ? (
          <p className="empty">{lines.length ? "No line matches the filter." : "No log lines yet."}</p>
        ) : (
          shown.map((l) => (
            <div key={l.seq} className={`log-line level-${l.level.toLowerCase()}`}>
              <time dateTime={l.time}>{l.time.slice(11, 23)}</time>
              <span className="log-level">{l.level}</span>
              <span className="log-target" title={l.target}>
                {l.target}
              </span>
              <span className="log-message">{l.message}</span>
            </div>
          ))
        )}
      </div>
      <p className="note">
        The last {lines.length} lines of this session ({shown.length} shown). The daemon keeps its most recent lines in
        memory; <code>MLXR_LOG</code> sets the level.
      </p>
    </div>
  );
}
