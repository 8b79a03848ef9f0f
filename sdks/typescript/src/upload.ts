/**
 * A request body sent with upload progress. `fetch` reports none (streamed
 * request bodies need HTTP/2 in browsers), so where XMLHttpRequest exists
 * (a browser page) it sends the body and reports bytes as they go; a
 * transport that sends a stream body as it reads it (the Unix socket's)
 * gets one that counts the bytes it takes; elsewhere `fetch` sends the body
 * and progress comes once, at the end.
 */
export interface Sent {
  status: number;
  text: string;
}

export interface Transport {
  fetch: typeof fetch;
  /** Whether `fetch` writes a ReadableStream body piece by piece, with a Content-Length it is given. */
  streamsBodies: boolean;
}

type Progress = (sent: number, total: number) => void;

export function sendWithProgress(
  url: string,
  headers: Record<string, string>,
  body: Blob,
  onProgress: Progress,
  signal: AbortSignal | undefined,
  transport: Transport,
): Promise<Sent> {
  if (transport.streamsBodies) return viaStream(url, headers, body, onProgress, signal, transport.fetch);
  if (typeof XMLHttpRequest === "undefined") return viaFetch(url, headers, body, onProgress, signal, transport.fetch);
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : body.size);
    xhr.onload = () => resolve({ status: xhr.status, text: xhr.responseText });
    xhr.onerror = () => reject(new Error(`the upload to ${url} failed (connection lost?)`));
    xhr.onabort = () => reject(new DOMException("The upload was aborted.", "AbortError"));
    if (signal?.aborted) return reject(new DOMException("The upload was aborted.", "AbortError"));
    signal?.addEventListener("abort", () => xhr.abort(), { once: true });
    xhr.send(body);
  });
}

async function viaFetch(
  url: string,
  headers: Record<string, string>,
  body: Blob,
  onProgress: Progress,
  signal: AbortSignal | undefined,
  fetchFn: typeof fetch,
): Promise<Sent> {
  const response = await fetchFn(url, { method: "POST", headers, body, signal });
  const text = await response.text();
  if (response.ok) onProgress(body.size, body.size);
  return { status: response.status, text };
}

async function viaStream(
  url: string,
  headers: Record<string, string>,
  body: Blob,
  onProgress: Progress,
  signal: AbortSignal | undefined,
  fetchFn: typeof fetch,
): Promise<Sent> {
  const sized = { ...headers, "Content-Length": String(body.size) };
  const response = await fetchFn(url, { method: "POST", headers: sized, body: counted(body, onProgress), signal });
  return { status: response.status, text: await response.text() };
}

/** An upload's piece: progress moves this finely (a Blob's own stream may be one chunk). */
const PIECE = 256 * 1024;

/** `body` in pieces, each reported to `onProgress` as the transport takes it (not ahead of it). */
function counted(body: Blob, onProgress: Progress): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (sent >= body.size) return controller.close();
        const piece = new Uint8Array(await body.slice(sent, sent + PIECE).arrayBuffer());
        controller.enqueue(piece);
        sent += piece.byteLength;
        onProgress(sent, body.size);
      },
    },
    { highWaterMark: 0 },
  );
}
