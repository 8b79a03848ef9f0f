import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sha256File } from "./sha256File";

describe("sha256File", () => {
  it("equals one whole-buffer SHA-256 across chunk edges, with progress", async () => {
    // 8 MiB chunks: a file of two whole chunks and a partial third.
    const bytes = new Uint8Array(2 * 8 * 1024 * 1024 + 12345);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31 + (i >> 13)) & 0xff;
    const seen: number[] = [];
    const digest = await sha256File(new Blob([bytes]), (done) => seen.push(done));
    expect(digest).toBe(`sha256:${createHash("sha256").update(bytes).digest("hex")}`);
    expect(seen).toEqual([8 * 1024 * 1024, 16 * 1024 * 1024, bytes.length]);
  });

  it("of an empty file", async () => {
    expect(await sha256File(new Blob([]))).toBe(`sha256:${createHash("sha256").digest("hex")}`);
  });

  it("stops on an aborted signal", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(sha256File(new Blob(["abc"]), undefined, controller.signal)).rejects.toMatchObject({ name: "AbortError" });
  });
});
