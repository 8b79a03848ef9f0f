import { createHash } from "node:crypto";
import { act, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonResponse, TAGS } from "../../test/fakeStream";
import { nameOf } from "./ImportForm";
import { ModelsPage } from "./ModelsPage";

const BYTES = "GGUF and some tensor bytes";
const DIGEST = `sha256:${createHash("sha256").update(BYTES).digest("hex")}`;

/** XMLHttpRequest as the SDK's upload uses it; the test drives its events. */
class FakeXhr {
  static last: FakeXhr | null = null;
  url = "";
  headers: Record<string, string> = {};
  body: Blob | null = null;
  aborted = false;
  status = 0;
  responseText = "";
  upload: { onprogress: ((e: { loaded: number; total: number; lengthComputable: boolean }) => void) | null } = { onprogress: null };
  onload: (() => void) | null = null;
  onerror: (() => void) | null = null;
  onabort: (() => void) | null = null;
  open(_method: string, url: string) {
    this.url = url;
  }
  setRequestHeader(name: string, value: string) {
    this.headers[name] = value;
  }
  send(body: Blob) {
    this.body = body;
    FakeXhr.last = this;
  }
  abort() {
    this.aborted = true;
    this.onabort?.();
  }
  progress(loaded: number, total: number) {
    this.upload.onprogress?.({ loaded, total, lengthComputable: true });
  }
  finish(status: number, text = "") {
    this.status = status;
    this.responseText = text;
    this.onload?.();
  }
}

function mockDaemon({ hasBlob = false } = {}) {
  const created: unknown[] = [];
  const fetch = vi.fn(async (url: string, init: RequestInit = {}) => {
    if (url === "/api/tags") return jsonResponse(TAGS);
    if (url === `/api/blobs/${encodeURIComponent(DIGEST)}` && init.method === "HEAD") return new Response(null, { status: hasBlob ? 200 : 404 });
    if (url === "/api/create") {
      created.push(JSON.parse(String(init.body)));
      return new Response('{"status":"using existing layer"}\n{"status":"success"}\n');
    }
    return jsonResponse({ error: `unexpected ${url}` }, 404);
  });
  vi.stubGlobal("fetch", fetch);
  FakeXhr.last = null;
  vi.stubGlobal("XMLHttpRequest", FakeXhr);
  return { created, fetch };
}

const file = (name: string) => new File([BYTES], name);

function choose(f: File) {
  fireEvent.change(screen.getByLabelText("GGUF file"), { target: { files: [f] } });
}

describe("ImportForm", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("names a model after its file", () => {
    expect(nameOf("Qwen2.5-0.5B Instruct.Q4_K_M.gguf")).toBe("qwen2.5-0.5b-instruct.q4_k_m");
    expect(nameOf("--odd name!.GGUF")).toBe("odd-name");
  });

  it("hashes a chosen file, uploads it with progress, then creates the model", async () => {
    const { created } = mockDaemon();
    render(<ModelsPage />);
    choose(file("Tiny Model.gguf"));
    const name = screen.getByRole("textbox", { name: "Import as" }) as HTMLInputElement;
    expect(name.value).toBe("tiny-model");
    fireEvent.change(name, { target: { value: "my-tiny" } });
    fireEvent.click(screen.getByRole("button", { name: "Import" }));
    await waitFor(() => expect(FakeXhr.last).not.toBeNull());
    const xhr = FakeXhr.last!;
    expect(xhr.url).toBe(`/api/blobs/${encodeURIComponent(DIGEST)}`);
    expect(await xhr.body!.text()).toBe(BYTES);
    act(() => xhr.progress(10, BYTES.length));
    const bar = await screen.findByRole("progressbar", { name: "Upload progress" });
    expect(bar.getAttribute("value")).toBe("10");
    expect(bar.getAttribute("max")).toBe(String(BYTES.length));
    act(() => xhr.finish(201));
    expect(await screen.findByText("Imported my-tiny.")).toBeTruthy();
    expect(created).toEqual([{ model: "my-tiny", files: { "Tiny Model.gguf": DIGEST }, stream: true }]);
  });

  it("skips the upload of a blob the daemon has", async () => {
    const { created } = mockDaemon({ hasBlob: true });
    render(<ModelsPage />);
    choose(file("a.gguf"));
    fireEvent.click(screen.getByRole("button", { name: "Import" }));
    expect(await screen.findByText("Imported a.")).toBeTruthy();
    expect(FakeXhr.last).toBeNull();
    expect(created).toHaveLength(1);
  });

  it("takes a dropped file, refuses one that is not GGUF", async () => {
    mockDaemon();
    render(<ModelsPage />);
    const panel = screen.getByRole("region", { name: "Import a GGUF file" });
    fireEvent.drop(panel, { dataTransfer: { files: [file("weights.safetensors")] } });
    expect(await screen.findByText(/weights.safetensors is not a .gguf file/)).toBeTruthy();
    expect((screen.getByRole("button", { name: "Import" }) as HTMLButtonElement).disabled).toBe(true);
    fireEvent.drop(panel, { dataTransfer: { files: [file("dropped.gguf")] } });
    expect((screen.getByRole("textbox", { name: "Import as" }) as HTMLInputElement).value).toBe("dropped");
    expect(screen.queryByText(/is not a .gguf file/)).toBeNull();
  });

  it("Cancel import aborts the upload; nothing is created", async () => {
    const { created } = mockDaemon();
    render(<ModelsPage />);
    choose(file("big.gguf"));
    fireEvent.click(screen.getByRole("button", { name: "Import" }));
    await waitFor(() => expect(FakeXhr.last).not.toBeNull());
    fireEvent.click(screen.getByRole("button", { name: "Cancel import" }));
    expect(FakeXhr.last!.aborted).toBe(true);
    expect(await screen.findByText("Import of big cancelled.")).toBeTruthy();
    expect(created).toEqual([]);
  });

  it("shows the daemon's refusal of the upload", async () => {
    mockDaemon();
    render(<ModelsPage />);
    choose(file("huge.gguf"));
    fireEvent.click(screen.getByRole("button", { name: "Import" }));
    await waitFor(() => expect(FakeXhr.last).not.toBeNull());
    act(() => FakeXhr.last!.finish(413, '{"error":"blob is larger than the daemon allows"}'));
    expect(await screen.findByText("Import of huge failed: HTTP 413: blob is larger than the daemon allows")).toBeTruthy();
  });
});
