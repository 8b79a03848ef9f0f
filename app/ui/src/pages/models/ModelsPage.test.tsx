import { fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fakeStream, jsonResponse, TAGS } from "../../test/fakeStream";
import { ModelsPage } from "./ModelsPage";

function mockDaemon() {
  const pull = { stream: null as ReturnType<typeof fakeStream> | null, init: null as RequestInit | null };
  const fetch = vi.fn(async (url: string, init: RequestInit = {}) => {
    if (url === "/api/tags") return jsonResponse(TAGS);
    if (url === "/api/pull") {
      pull.init = init;
      pull.stream = fakeStream(init.signal);
      return pull.stream.response;
    }
    return jsonResponse({ error: `unexpected ${url}` }, 404);
  });
  vi.stubGlobal("fetch", fetch);
  return { pull, fetch };
}

const progress = (completed: number) =>
  JSON.stringify({ status: "pulling sha256:abc", digest: "sha256:abc", total: 1000, completed }) + "\n";

async function startPull(name: string) {
  fireEvent.change(screen.getByRole("textbox", { name: "Model name" }), { target: { value: name } });
  fireEvent.click(screen.getByRole("button", { name: "Pull" }));
}

describe("ModelsPage", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("lists the installed models", async () => {
    mockDaemon();
    render(<ModelsPage />);
    const row = (await screen.findByRole("rowheader", { name: "smollm2:135m" })).closest("tr")!;
    const cells = within(row).getAllByRole("cell").map((c) => c.textContent);
    expect(cells.slice(0, 4)).toEqual(["92.0 MiB", "llama", "135M", "Q4_1"]);
    expect(within(row).getByRole("button", { name: "Delete smollm2:135m" })).toBeTruthy();
  });

  it("shows a pull's progress, then reloads the list", async () => {
    const { pull, fetch } = mockDaemon();
    render(<ModelsPage />);
    await screen.findByRole("rowheader", { name: "smollm2:135m" });
    await startPull("gemma3:270m");
    await vi.waitFor(() => expect(pull.stream).not.toBeNull());
    expect(JSON.parse(String(pull.init?.body))).toEqual({ model: "gemma3:270m", stream: true });

    pull.stream!.push('{"status":"pulling manifest"}\n');
    expect(await screen.findByText("pulling manifest")).toBeTruthy();
    const bar = screen.getByRole("progressbar", { name: "Pull progress" });
    expect(bar.getAttribute("value")).toBeNull();

    pull.stream!.push(progress(250));
    expect(await screen.findByText(/\(25%\)/)).toBeTruthy();
    expect(screen.getByRole("progressbar", { name: "Pull progress" }).getAttribute("value")).toBe("250");
    pull.stream!.push(progress(1000).slice(0, 10));
    pull.stream!.push(progress(1000).slice(10));
    expect(await screen.findByText(/\(100%\)/)).toBeTruthy();

    pull.stream!.push('{"status":"success"}\n');
    pull.stream!.close();
    expect(await screen.findByText("Pulled gemma3:270m.")).toBeTruthy();
    await vi.waitFor(() => expect(fetch.mock.calls.filter(([u]) => u === "/api/tags")).toHaveLength(2));
  });

  it("Cancel aborts the pull", async () => {
    const { pull } = mockDaemon();
    render(<ModelsPage />);
    await startPull("big");
    await vi.waitFor(() => expect(pull.stream).not.toBeNull());
    pull.stream!.push(progress(100));
    await screen.findByText(/\(10%\)/);
    fireEvent.click(screen.getByRole("button", { name: "Cancel" }));
    expect(pull.init?.signal?.aborted).toBe(true);
    expect(await screen.findByText("Pull of big cancelled.")).toBeTruthy();
  });

  it("shows a failed pull's error", async () => {
    const { pull } = mockDaemon();
    render(<ModelsPage />);
    await startPull("nope");
    await vi.waitFor(() => expect(pull.stream).not.toBeNull());
    pull.stream!.push('{"error":"unknown model nope"}\n');
    expect((await screen.findByRole("alert")).textContent).toBe("Pull of nope failed: unknown model nope");
  });
});
