export function LogsPage() {
  return (
    <div className="page">
      <h1>Logs</h1>
      <section className="panel">
        <h2>Live log tail — not built yet</h2>
        <p>
          The daemon has no log-streaming endpoint yet, so this page cannot show its log. Until then the log is the
          standard error of <code>mlxr serve</code> (one line per request; <code>MLXR_LOG</code> sets the level).
        </p>
      </section>
    </div>
  );
}
