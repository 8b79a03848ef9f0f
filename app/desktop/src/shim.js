// mlxr-desktop's fetch shim, run in the page before its own scripts.
// Requests of the page's origin to the API (/api/, /v1/, /health, /metrics)
// go to the app over IPC, which sends them to the daemon's Unix socket; the
// app calls back head(), chunk() for each piece of the body as the daemon
// writes it, then end() or fail(), so SSE and NDJSON streams stay
// incremental. Everything else goes to the browser's own fetch.
(() => {
  "use strict";
  if (window.__mlxrBridge) return;
  const nativeFetch = window.fetch.bind(window);
  const pending = new Map();
  let nextId = 1;
  // Per request: path, when it started, got its head, each chunk, ended
  // (performance.now() ms). The desktop tests read these.
  const log = [];

  const isApi = (p) => p.startsWith("/api/") || p.startsWith("/v1/") || p === "/health" || p === "/metrics";

  const toBase64 = (buffer) => {
    const bytes = new Uint8Array(buffer);
    let s = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(s);
  };
  const fromBase64 = (s) => {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  };
  const post = (message) => window.ipc.postMessage(JSON.stringify(message));
  const abortError = () => new DOMException("The operation was aborted.", "AbortError");

  window.__mlxrBridge = {
    log,
    head(id, status, statusText, headers) {
      const p = pending.get(id);
      if (!p) return;
      p.entry.head = performance.now();
      p.entry.status = status;
      const nullBody = [101, 204, 205, 304].includes(status);
      const body = nullBody
        ? null
        : new ReadableStream({
            start(controller) {
              p.controller = controller;
            },
            cancel() {
              pending.delete(id);
              post({ op: "cancel", id });
            },
          });
      p.resolve(new Response(body, { status, statusText, headers }));
    },
    chunk(id, data) {
      const p = pending.get(id);
      if (!p || !p.controller) return;
      p.entry.chunks.push(performance.now());
      p.controller.enqueue(fromBase64(data));
    },
    end(id) {
      const p = pending.get(id);
      if (!p) return;
      pending.delete(id);
      p.entry.end = performance.now();
      if (p.controller) p.controller.close();
    },
    fail(id, message) {
      const p = pending.get(id);
      if (!p) return;
      pending.delete(id);
      p.entry.error = message;
      const error = new TypeError(`MLXR desktop bridge: ${message}`);
      if (p.controller) p.controller.error(error);
      else p.reject(error);
    },
  };

  window.fetch = async function (input, init) {
    const isRequest = input instanceof Request;
    const url = new URL(isRequest ? input.url : String(input), location.href);
    if (url.protocol !== location.protocol || url.host !== location.host || !isApi(url.pathname)) {
      return nativeFetch(input, init);
    }
    const options = init || {};
    const method = (options.method || (isRequest ? input.method : "GET")).toUpperCase();
    const headers = new Headers(options.headers || (isRequest ? input.headers : undefined));
    const signal = options.signal || (isRequest ? input.signal : undefined);
    let body = null;
    if (options.body !== undefined && options.body !== null) {
      body = await new Response(options.body).arrayBuffer();
    } else if (isRequest && input.body) {
      body = await input.arrayBuffer();
    }
    if (signal && signal.aborted) throw abortError();
    const id = nextId++;
    const entry = { id, method, path: url.pathname + url.search, start: performance.now(), chunks: [] };
    log.push(entry);
    return new Promise((resolve, reject) => {
      const p = { resolve, reject, controller: null, entry };
      pending.set(id, p);
      if (signal) {
        signal.addEventListener("abort", () => {
          if (!pending.has(id)) return;
          pending.delete(id);
          entry.aborted = performance.now();
          post({ op: "cancel", id });
          if (p.controller) p.controller.error(abortError());
          else reject(abortError());
        });
      }
      post({
        op: "fetch",
        id,
        method,
        path: url.pathname + url.search,
        headers: [...headers.entries()],
        body: body === null ? null : toBase64(body),
      });
    });
  };
})();
