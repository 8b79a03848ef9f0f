// Starts a real `mlxr serve` for the tests, as tests/api/conftest.py does:
// SmolLM2 as "smollm2" and MiniLM as "all-minilm" on a free port, its
// registry in a temporary MLXR home. MLXR_BIN (default
// target/release/mlxr) and MLXR_MODELS_DIR (default ~/.cache/mlxr/models)
// say where the binary and the models are; a missing model fails the run.
// startSocketDaemon: the same on a Unix socket only (`--socket PATH --no-tcp`).
import { spawn } from "node:child_process";
import { createReadStream, existsSync, mkdtempSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
export const MODEL = "smollm2";
export const MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf";
export const EMBED_MODEL = "all-minilm";
export const modelsDir = process.env.MLXR_MODELS_DIR || join(homedir(), ".cache/mlxr/models");

function freePort() {
  return new Promise((done, fail) => {
    const server = createTcpServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

/** `mlxr serve ARGS`, ready once it logs its TCP listener (with `--no-tcp`, its socket). */
export async function startDaemon(...extra) {
  const model = join(modelsDir, MODEL_FILE);
  const embedder = join(modelsDir, "all-MiniLM-L6-v2");
  for (const path of [model, embedder]) {
    if (!existsSync(path)) throw new Error(`${path} missing: run scripts/fetch-models.sh`);
  }
  const bin = process.env.MLXR_BIN || join(ROOT, "target/release/mlxr");
  const port = await freePort();
  const home = mkdtempSync(join(tmpdir(), "mlxr-sdk-ts-"));
  const proc = spawn(bin, ["serve", "-m", model, "--name", MODEL, "-m", embedder, "--name", EMBED_MODEL,
    "--home", home, "--host", `127.0.0.1:${port}`, "--kv-cache-mem", "256MiB", ...extra],
  { stdio: ["ignore", "pipe", "pipe"] });
  const tcp = !extra.includes("--no-tcp");
  let log = "";
  await new Promise((ready, fail) => {
    const watch = (chunk) => {
      log += chunk;
      if (log.includes(tcp ? "listening on http://" : "listening on unix:")) ready();
    };
    proc.stdout.on("data", watch);
    proc.stderr.on("data", watch);
    proc.once("exit", (code) => fail(new Error(`mlxr serve exited (${code}) before listening: ${log}`)));
    proc.once("error", fail);
  });
  return {
    url: tcp ? `http://127.0.0.1:${port}` : undefined,
    home,
    log: () => log,
    stop: () => new Promise((done) => {
      if (proc.exitCode !== null) return done();
      proc.removeAllListeners("exit");
      proc.once("exit", done);
      proc.kill("SIGTERM");
    }),
  };
}

/** `mlxr serve --socket DIR/mlxr.sock --no-tcp ARGS`; `socket` is the path. */
export async function startSocketDaemon(...extra) {
  const socket = join(mkdtempSync(join(tmpdir(), "mlxr-sdk-ts-sock-")), "mlxr.sock");
  return { ...(await startDaemon("--socket", socket, "--no-tcp", ...extra)), socket };
}

/** The models folder over plain http: a pull source that needs no network. */
export function serveModelFiles() {
  const server = createServer((req, res) => {
    const path = join(modelsDir, decodeURIComponent(new URL(req.url, "http://x").pathname));
    if (!path.startsWith(modelsDir) || !existsSync(path) || !statSync(path).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Length": statSync(path).size });
    createReadStream(path).pipe(res);
  });
  return new Promise((done) => {
    server.listen(0, "127.0.0.1", () => done({
      url: `http://127.0.0.1:${server.address().port}`,
      close: () => new Promise((closed) => server.close(closed)),
    }));
  });
}
