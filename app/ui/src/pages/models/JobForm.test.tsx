import { fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../../test/fakeStream";
import { ModelDetails } from "./ModelDetails";

const job = (status: string, progress: object, extra: object = {}) => ({
  id: "7",
  kind: "convert",
  model: "tiny-hf-gguf-f16",
  outtype: "f16",
  status,
  progress,
  started_at: "2026-12-06T08:00:00.000Z",
  ...extra,
});

/** The daemon of one model whose /api/show says `show`; job requests recorded, answered by `answers`. */
function mockDaemon(show: object, answers: { start?: object; startStatus?: number; poll?: object; cancel?: object } = {}) {
  const calls: { method: string; url: string; body?: unknown }[] = [];
  const fetch = vi.fn(async (url: string, init: RequestInit = {}) => {
    const method = init.method ?? "GET";
    calls.push({ method, url, body: init.body ? JSON.parse(String(init.body)) : undefined });
    if (url === "/api/show") return jsonResponse(show);
    if (url === "/api/mlxr/jobs" && method === "POST") return jsonResponse(answers.start, answers.startStatus ?? 202);
    if (url === "/api/mlxr/jobs/7" && method === "GET") return jsonResponse(answers.poll);
    if (url === "/api/mlxr/jobs/7" && method === "DELETE") return jsonResponse(answers.cancel);
    return jsonResponse({ error: `unexpected ${method} ${url}` }, 404);
  });
  vi.stubGlobal("fetch", fetch);
  return calls;
}

const FOLDER = { details: { format: "safetensors", family: "llama" }, capabilities: ["completion"] };

describe("model details' jobs", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("a GGUF model offers Quantize and Convert to a folder, a folder model Quantize and Convert to GGUF, an embedding folder none", async () => {
    mockDaemon({ details: { format: "gguf" }, capabilities: ["completion"] });
    const { unmount } = render(<ModelDetails name="smollm2:latest" onClose={() => {}} onChanged={() => {}} />);
    expect(await screen.findByRole("form", { name: "Quantize" })).toBeTruthy();
    const toFolder = screen.getByRole("form", { name: "Convert to a Hugging Face folder" });
    expect(within(toFolder).queryByRole("textbox", { name: "Pre-tokenizer" })).toBeNull();
    expect(screen.queryByRole("form", { name: "Convert to GGUF" })).toBeNull();
    unmount();

    mockDaemon(FOLDER);
    const folder = render(<ModelDetails name="tiny-hf:latest" onClose={() => {}} onChanged={() => {}} />);
    expect(await screen.findByRole("form", { name: "Convert to GGUF" })).toBeTruthy();
    expect(screen.getByRole("form", { name: "Quantize" })).toBeTruthy();
    expect(screen.queryByRole("form", { name: "Convert to a Hugging Face folder" })).toBeNull();
    folder.unmount();

    mockDaemon({ details: { format: "safetensors", family: "bert" }, capabilities: ["embedding"] });
    render(<ModelDetails name="all-minilm:latest" onClose={() => {}} onChanged={() => {}} />);
    await screen.findByText("bert");
    expect(screen.queryByRole("form", { name: "Convert to GGUF" })).toBeNull();
    expect(screen.queryByRole("form", { name: "Convert to a Hugging Face folder" })).toBeNull();
    expect(screen.queryByRole("form", { name: "Quantize" })).toBeNull();
  });

  it("converts as a job: progress of tensors, then the new model", async () => {
    const calls = mockDaemon(FOLDER, {
      start: job("running", { status: "converting tiny-hf:latest to GGUF (f16)", completed: 3, total: 10 }),
      poll: job("success", { status: "success" }),
    });
    const changed = vi.fn();
    render(<ModelDetails name="tiny-hf:latest" onClose={() => {}} onChanged={changed} />);
    const form = await screen.findByRole("form", { name: "Convert to GGUF" });
    const newName = within(form).getByRole("textbox", { name: "New model name" }) as HTMLInputElement;
    expect(newName.value).toBe("tiny-hf-gguf");
    fireEvent.change(within(form).getByRole("combobox", { name: "Out type" }), { target: { value: "f16" } });
    expect(newName.value).toBe("tiny-hf-gguf-f16");
    fireEvent.submit(form);
    const bar = await screen.findByRole("progressbar", { name: "Convert progress" });
    expect([bar.getAttribute("value"), bar.getAttribute("max")]).toEqual(["3", "10"]);
    expect(screen.getByText("converting tiny-hf:latest to GGUF (f16) — 3 of 10 tensors")).toBeTruthy();
    expect(calls.find((c) => c.method === "POST" && c.url === "/api/mlxr/jobs")?.body).toEqual({ kind: "convert", model: "tiny-hf-gguf-f16", from: "tiny-hf:latest", outtype: "f16" });
    expect(await screen.findByText("Converted tiny-hf:latest to tiny-hf-gguf-f16 (f16).")).toBeTruthy();
    expect(changed).toHaveBeenCalledTimes(1);
  });

  it("sends the pre-tokenizer given for a tokenizer the converter does not recognise", async () => {
    const calls = mockDaemon(FOLDER, { start: job("success", { status: "success" }) });
    render(<ModelDetails name="tiny-hf:latest" onClose={() => {}} onChanged={() => {}} />);
    const form = await screen.findByRole("form", { name: "Convert to GGUF" });
    fireEvent.change(within(form).getByRole("textbox", { name: "Pre-tokenizer" }), { target: { value: " qwen2 " } });
    fireEvent.submit(form);
    await screen.findByText(/^Converted tiny-hf:latest/);
    expect(calls.find((c) => c.method === "POST" && c.url === "/api/mlxr/jobs")?.body).toEqual({
      kind: "convert",
      model: "tiny-hf-gguf",
      from: "tiny-hf:latest",
      outtype: "auto",
      tokenizer_pre: "qwen2",
    });
  });

  it("Cancel convert cancels the job", async () => {
    const running = job("running", { status: "converting", completed: 1, total: 10 });
    const calls = mockDaemon(FOLDER, { start: running, poll: running, cancel: job("cancelled", running.progress) });
    render(<ModelDetails name="tiny-hf:latest" onClose={() => {}} onChanged={() => {}} />);
    fireEvent.submit(await screen.findByRole("form", { name: "Convert to GGUF" }));
    fireEvent.click(await screen.findByRole("button", { name: "Cancel convert" }));
    expect(await screen.findByText("Convert to tiny-hf-gguf-f16 cancelled.")).toBeTruthy();
    await waitFor(() => expect(calls.some((c) => c.method === "DELETE" && c.url === "/api/mlxr/jobs/7")).toBe(true));
  });

  it("shows a refused job's error, and a failed one's", async () => {
    mockDaemon(FOLDER, { start: { error: "convert: architecture FalconForCausalLM is not supported" }, startStatus: 400 });
    const refused = render(<ModelDetails name="tiny-hf:latest" onClose={() => {}} onChanged={() => {}} />);
    fireEvent.submit(await screen.findByRole("form", { name: "Convert to GGUF" }));
    expect(await screen.findByText("HTTP 400: convert: architecture FalconForCausalLM is not supported")).toBeTruthy();
    refused.unmount();

    mockDaemon(FOLDER, { start: job("error", { error: "disk full" }, { error: "converting: disk full" }) });
    render(<ModelDetails name="tiny-hf:latest" onClose={() => {}} onChanged={() => {}} />);
    fireEvent.submit(await screen.findByRole("form", { name: "Convert to GGUF" }));
    expect(await screen.findByText("Convert to tiny-hf-gguf-f16 failed: converting: disk full")).toBeTruthy();
  });

  it("quantizes as before", async () => {
    const calls = mockDaemon({ details: { format: "gguf" } }, {
      start: job("success", { status: "success" }, { kind: "quantize", model: "smollm2-q4_k_m", quantize: "Q4_K_M", outtype: undefined }),
    });
    render(<ModelDetails name="smollm2:latest" onClose={() => {}} onChanged={() => {}} />);
    fireEvent.submit(await screen.findByRole("form", { name: "Quantize" }));
    expect(await screen.findByText("Quantized smollm2:latest to smollm2-q4_k_m (Q4_K_M).")).toBeTruthy();
    expect(calls.find((c) => c.method === "POST" && c.url === "/api/mlxr/jobs")?.body).toEqual({ model: "smollm2-q4_k_m", from: "smollm2:latest", quantize: "Q4_K_M" });
  });
});
