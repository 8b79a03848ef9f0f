import { createSHA256 } from "hash-wasm";

/** Bytes read at a time: large files are hashed without holding them in memory. */
const CHUNK = 8 * 1024 * 1024;

/**
 * `sha256:<hex>` of a file, read in chunks (crypto.subtle.digest takes
 * the whole file at once); `onProgress` gets the bytes hashed so far.
 * An aborted `signal` stops between chunks with an AbortError.
 */
export async function sha256File(file: Blob, onProgress?: (done: number, total: number) => void, signal?: AbortSignal): Promise<string> {
  const hasher = await createSHA256();
  hasher.init();
  for (let offset = 0; offset < file.size; offset += CHUNK) {
    if (signal?.aborted) throw new DOMException("Hashing was aborted.", "AbortError");
    const end = Math.min(offset + CHUNK, file.size);
    hasher.update(new Uint8Array(await file.slice(offset, end).arrayBuffer()));
    onProgress?.(end, file.size);
  }
  return `sha256:${hasher.digest("hex")}`;
}
