// mlxr-desktop's fetch and XMLHttpRequest shim, run in the page before its
// own scripts. Requests of the page's origin to the API (/api/, /v1/,
// /health, /metrics) go to the app over IPC, which sends them to the
// daemon's Unix socket: the request, then its body in numbered pieces of
// 2 MiB at most (read from the Blob or stream as they go, a few in flight at
// once, so a multi-GB upload never sits whole in memory); the app calls
// back sent() as each piece reaches the daemon (upload progress), head(),
// chunk() for each piece of the response body as the daemon writes it, then
// end() or fail(), so SSE and NDJSON streams stay incremental. Everything
// else goes to the browser's own fetch and XMLHttpRequest.
(() => {
  "use strict";
  if (window.__mlxrBridge) return;
  const nativeFetch = window.fetch.bind(window);
  const NativeXHR = window.XMLHttpRequest;
  const PIECE = 2 << 20;
  // Pieces posted but not yet written to the daemon.
  const WINDOW = 2;
  const pending = new Map();
  let nextId = 1;
  // Per request: path, when it started, got its head, each chunk, ended
  // (performance.now() ms), bytes of its body sent. The desktop tests read
  // these.
  const log = [];

  const isApi = (p) => p.startsWith("/api/") || p.startsWith("/v1/") || p === "/health" || p === "/metrics";
  const apiUrl = (input) => {
    const url = new URL(String(input), location.href);
    return url.protocol === location.protocol && url.host === location.host && isApi(url.pathname) ? url : null;
  };

  const toBase64 = (bytes) => {
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

  // A body as the bridge takes it: a Blob (sliced as it is read) or a
  // stream (size unknown: sent chunked), with the Content-Type it implies.
  const bodySource = async (body) => {
    if (body === null || body === undefined) return { blob: new Blob([]), type: null };
    if (body instanceof ReadableStream) return { stream: body, type: null };
    if (body instanceof Blob) return { blob: body, type: body.type || null };
    const r = new Response(body);
    return { blob: await r.blob(), type: r.headers.get("content-type") };
  };

  // The body's pieces, PIECE bytes at most.
  async function* pieces(source) {
    if (source.stream) {
      const reader = source.stream.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        const bytes = value instanceof Uint8Array ? value : new Uint8Array(value);
        for (let i = 0; i < bytes.length; i += PIECE) yield bytes.subarray(i, i + PIECE);
      }
    }
    for (let at = 0; at < source.blob.size; at += PIECE) {
      yield new Uint8Array(await source.blob.slice(at, at + PIECE).arrayBuffer());
    }
  }

  // Posts the body's pieces, at most WINDOW unwritten at once; stops when
  // the request ends or is cancelled.
  const sendBody = async (id, p, source) => {
    let seq = 0;
    for await (const piece of pieces(source)) {
      while (pending.get(id) === p && p.unsent >= WINDOW) await new Promise((wake) => (p.wake = wake));
      if (pending.get(id) !== p) return;
      p.unsent++;
      post({ op: "body", id, seq: seq++, data: toBase64(piece) });
    }
    if (pending.get(id) === p) post({ op: "body", id, seq, last: true });
  };
  const wake = (p) => {
    const w = p.wake;
    p.wake = null;
    if (w) w();
  };

  // One request through the bridge; `on` gets sent(bytes, total),
  // head(status, statusText, headers), chunk(bytes), end() and
  // fail(message). Resolves to a function that cancels it (true if it was
  // still in flight).
  const request = async (method, path, headers, body, on) => {
    const source = await bodySource(body);
    if (source.type && !headers.has("content-type")) headers.set("content-type", source.type);
    const total = source.blob ? source.blob.size : null;
    const id = nextId++;
    const entry = { id, method, path, start: performance.now(), chunks: [], sent: 0 };
    log.push(entry);
    const p = { on, entry, total, unsent: 0, wake: null };
    pending.set(id, p);
    post({ op: "fetch", id, method, path, headers: [...headers.entries()], length: total });
    sendBody(id, p, source).catch((e) => {
      if (pending.get(id) !== p) return;
      finish(id);
      post({ op: "cancel", id });
      on.fail(`reading the request body: ${e}`);
    });
    return () => {
      if (pending.get(id) !== p) return false;
      finish(id);
      entry.aborted = performance.now();
      post({ op: "cancel", id });
      return true;
    };
  };
  const finish = (id) => {
    const p = pending.get(id);
    pending.delete(id);
    if (p) wake(p);
    return p;
  };

  window.__mlxrBridge = {
    log,
    sent(id, bytes) {
      const p = pending.get(id);
      if (!p) return;
      p.unsent--;
      p.entry.sent = bytes;
      wake(p);
      p.on.sent(bytes, p.total);
    },
    head(id, status, statusText, headers) {
      const p = pending.get(id);
      if (!p) return;
      p.entry.head = performance.now();
      p.entry.status = status;
      p.on.head(status, statusText, headers);
    },
    chunk(id, data) {
      const p = pending.get(id);
      if (!p) return;
      p.entry.chunks.push(performance.now());
      p.on.chunk(fromBase64(data));
    },
    end(id) {
      const p = finish(id);
      if (!p) return;
      p.entry.end = performance.now();
      p.on.end();
    },
    fail(id, message) {
      const p = finish(id);
      if (!p) return;
      p.entry.error = message;
      p.on.fail(message);
    },
  };

  window.fetch = async function (input, init) {
    const isRequest = input instanceof Request;
    const url = apiUrl(isRequest ? input.url : input);
    if (!url) return nativeFetch(input, init);
    const options = init || {};
    const method = (options.method || (isRequest ? input.method : "GET")).toUpperCase();
    const headers = new Headers(options.headers || (isRequest ? input.headers : undefined));
    const signal = options.signal || (isRequest ? input.signal : undefined);
    let body = options.body;
    if ((body === undefined || body === null) && isRequest && input.body) body = await input.blob();
    if (signal && signal.aborted) throw abortError();
    return new Promise((resolve, reject) => {
      let controller = null;
      const fail = (error) => (controller ? controller.error(error) : reject(error));
      const on = {
        sent() {},
        head(status, statusText, headers) {
          const nullBody = [101, 204, 205, 304].includes(status);
          const stream = nullBody
            ? null
            : new ReadableStream({
                start(c) {
                  controller = c;
                },
                cancel: () => stop.then((c) => c()),
              });
          resolve(new Response(stream, { status, statusText, headers }));
        },
        chunk: (bytes) => controller && controller.enqueue(bytes),
        end: () => controller && controller.close(),
        fail: (message) => fail(new TypeError(`MLXR desktop bridge: ${message}`)),
      };
      const stop = request(method, url.pathname + url.search, headers, body, on);
      stop.catch((e) => fail(e));
      if (signal) {
        signal.addEventListener("abort", () => stop.then((c) => c() && fail(abortError())));
      }
    });
  };

  // XMLHttpRequest for the API, with upload progress (the SDK's blob upload
  // uses it): the bridge's requests behind the native object's interface;
  // other URLs are the native object's own.
  const progress = (type, loaded, total) =>
    new ProgressEvent(type, { lengthComputable: total !== null, loaded, total: total || 0 });
  class BridgeXHR extends NativeXHR {
    open(method, url, ...rest) {
      const target = apiUrl(url);
      this._bridge = null;
      if (!target) return super.open(method, url, ...rest);
      this._bridge = {
        method: String(method).toUpperCase(),
        path: target.pathname + target.search,
        url: target.href,
        headers: new Headers(),
        readyState: NativeXHR.OPENED,
        status: 0,
        statusText: "",
        responseHeaders: new Headers(),
        bytes: [],
        text: "",
        cancel: null,
      };
      this.dispatchEvent(new Event("readystatechange"));
    }
    setRequestHeader(name, value) {
      if (!this._bridge) return super.setRequestHeader(name, value);
      this._bridge.headers.append(name, value);
    }
    send(body) {
      const b = this._bridge;
      if (!b) return super.send(body);
      const decoder = new TextDecoder();
      const state = (s) => {
        b.readyState = s;
        this.dispatchEvent(new Event("readystatechange"));
      };
      const done = (type, loaded, total) => {
        state(NativeXHR.DONE);
        this.dispatchEvent(progress(type, loaded, total));
        this.dispatchEvent(progress("loadend", loaded, total));
      };
      let received = 0;
      const on = {
        sent: (bytes, total) => this.upload.dispatchEvent(progress("progress", bytes, total)),
        head: (status, statusText, headers) => {
          b.status = status;
          b.statusText = statusText;
          b.responseHeaders = new Headers(headers);
          state(NativeXHR.HEADERS_RECEIVED);
        },
        chunk: (bytes) => {
          received += bytes.length;
          b.bytes.push(bytes);
          b.text += decoder.decode(bytes, { stream: true });
          state(NativeXHR.LOADING);
          this.dispatchEvent(progress("progress", received, null));
        },
        end: () => {
          b.text += decoder.decode();
          done("load", received, null);
        },
        fail: () => {
          b.status = 0;
          done("error", 0, null);
        },
      };
      this.dispatchEvent(progress("loadstart", 0, null));
      b.cancel = request(b.method, b.path, b.headers, body === undefined ? null : body, on);
      b.cancel.catch(() => on.fail());
    }
    abort() {
      const b = this._bridge;
      if (!b) return super.abort();
      if (!b.cancel || b.readyState === NativeXHR.DONE) return;
      b.cancel.then((c) => c());
      b.status = 0;
      b.readyState = NativeXHR.DONE;
      this.dispatchEvent(new Event("readystatechange"));
      this.upload.dispatchEvent(progress("abort", 0, null));
      this.dispatchEvent(progress("abort", 0, null));
      this.dispatchEvent(progress("loadend", 0, null));
      b.readyState = NativeXHR.UNSENT;
    }
    getResponseHeader(name) {
      return this._bridge ? this._bridge.responseHeaders.get(name) : super.getResponseHeader(name);
    }
    getAllResponseHeaders() {
      if (!this._bridge) return super.getAllResponseHeaders();
      return [...this._bridge.responseHeaders.entries()].map(([n, v]) => `${n}: ${v}\r\n`).join("");
    }
    get readyState() {
      return this._bridge ? this._bridge.readyState : super.readyState;
    }
    get status() {
      return this._bridge ? this._bridge.status : super.status;
    }
    get statusText() {
      return this._bridge ? this._bridge.statusText : super.statusText;
    }
    get responseURL() {
      return this._bridge ? this._bridge.url : super.responseURL;
    }
    get responseText() {
      return this._bridge ? this._bridge.text : super.responseText;
    }
    get response() {
      const b = this._bridge;
      if (!b) return super.response;
      switch (this.responseType) {
        case "json":
          try {
            return JSON.parse(b.text);
          } catch {
            return null;
          }
        case "arraybuffer":
          return concat(b.bytes).buffer;
        case "blob":
          return new Blob(b.bytes, { type: b.responseHeaders.get("content-type") || "" });
        default:
          return b.text;
      }
    }
  }
  const concat = (parts) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
  window.XMLHttpRequest = BridgeXHR;
})();
