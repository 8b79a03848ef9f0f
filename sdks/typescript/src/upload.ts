/**
 * A request body sent with upload progress. `fetch` reports none (streamed
 * request bodies need HTTP/2 in browsers), so where XMLHttpRequest exists
 * (a browser page) it sends the body and reports bytes as they go; elsewhere
 * `fetch` sends it and progress comes once, at the end.
 */
export interface Sent {
  status: number;
  text: string;
}

export function sendWithProgress(
  url: string,
  headers: Record<string, string>,
  body: Blob,
  onProgress: (sent: number, total: number) => void,
  signal: AbortSignal | undefined,
  fetchFn: typeof fetch,
): Promise<Sent> {
  if (typeof XMLHttpRequest === "undefined") return viaFetch(url, headers, body, onProgress, signal, fetchFn);
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
  onProgress: (sent: number, total: number) => void,
  signal: AbortSignal | undefined,
  fetchFn: typeof fetch,
): Promise<Sent> {
  const response = await fetchFn(url, { method: "POST", headers, body, signal });
  const text = await response.text();
  if (response.ok) onProgress(body.size, body.size);
  return { status: response.status, text };
}
