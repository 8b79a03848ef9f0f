/** A response body the test writes to chunk by chunk; aborting `signal` errors it like fetch does. */
export function fakeStream(signal?: AbortSignal | null) {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
  });
  signal?.addEventListener("abort", () => controller.error(new DOMException("The operation was aborted.", "AbortError")));
  const encoder = new TextEncoder();
  return {
    response: new Response(stream, { headers: { "Content-Type": "application/x-ndjson" } }),
    push: (text: string) => controller.enqueue(encoder.encode(text)),
    close: () => controller.close(),
  };
}

export function jsonResponse(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

export const TAGS = {
  models: [
    {
      name: "smollm2:135m",
      model: "smollm2:135m",
      modified_at: "2025-01-02T03:04:05Z",
      size: 96_468_992,
      digest: "abc",
      details: { format: "gguf", family: "llama", parameter_size: "135M", quantization_level: "Q4_1" },
    },
  ],
};
