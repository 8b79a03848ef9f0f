export function SettingsPage() {
  return (
    <div className="page">
      <h1>Settings</h1>
      <section className="panel">
        <h2>API key</h2>
        <p>
          Enter the daemon's API key (<code>--api-key</code> / <code>MLXR_API_KEY</code>) in the <strong>API key</strong>{" "}
          field of the header. It is kept in this browser's localStorage and sent as{" "}
          <code>Authorization: Bearer …</code> with every request.
        </p>
      </section>
      <section className="panel">
        <h2>Server configuration — not built yet</h2>
        <p>
          The daemon has no endpoint that reports or changes its configuration yet, so this page cannot show it. Until
          then the configuration is the flags of <code>mlxr serve --help</code>.
        </p>
      </section>
    </div>
  );
}
