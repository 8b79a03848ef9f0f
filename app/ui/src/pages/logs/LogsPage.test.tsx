import { act, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fakeStream, jsonResponse } from "../../test/fakeStream";
import { LogsPage } from "./LogsPage";

const event = (seq: number, message: string, level = "INFO") =>
  `event: log\nid: ${seq}\ndata: ${JSON.stringify({ seq, time: "2026-01-02T03:04:05.678Z", level, target: "mlxr_server::server", message })}\n\n`;

function mockDaemon() {
  const logs = { stream: null as ReturnType<typeof fakeStream> | null, url: "" };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      if (url.startsWith("/api/mlxr/logs")) {
        logs.url = url;
        logs.stream = fakeStream(init.signal);
        return logs.stream.response;
      }
      return jsonResponse({ error: `unexpected ${url}` }, 404);
    }),
  );
  return logs;
}

describe("LogsPage", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("tails the log live, pauses, resumes and filters", async () => {
    const logs = mockDaemon();
    render(<LogsPage />);
    await vi.waitFor(() => expect(logs.stream).not.toBeNull());
    expect(logs.url).toBe("/api/mlxr/logs?tail=200");
    const first = event(1, "listening on http://127.0.0.1:1");
    act(() => {
      logs.stream!.push(first.slice(0, 30));
      logs.stream!.push(first.slice(30) + ": keep-alive\n\n");
    });
    expect(await screen.findByText("listening on http://127.0.0.1:1")).toBeTruthy();
    expect(screen.getByRole("status").textContent).toBe("Live");

    fireEvent.click(screen.getByRole("button", { name: "Pause" }));
    act(() => logs.stream!.push(event(2, "request method=POST path=/api/chat", "WARN")));
    await vi.waitFor(() => expect(screen.getByRole("status").textContent).toBe("Paused — 1 new"));
    expect(screen.queryByText("request method=POST path=/api/chat")).toBeNull();

    fireEvent.click(screen.getByRole("button", { name: "Resume" }));
    expect(await screen.findByText("request method=POST path=/api/chat")).toBeTruthy();
    act(() => logs.stream!.push(event(2, "duplicate seq is dropped")));

    fireEvent.change(screen.getByRole("combobox", { name: "Level" }), { target: { value: "WARN" } });
    expect(screen.queryByText("listening on http://127.0.0.1:1")).toBeNull();
    fireEvent.change(screen.getByRole("combobox", { name: "Level" }), { target: { value: "TRACE" } });
    fireEvent.change(screen.getByRole("searchbox", { name: "Filter" }), { target: { value: "LISTENING" } });
    expect(screen.getByText("listening on http://127.0.0.1:1")).toBeTruthy();
    expect(screen.queryByText("request method=POST path=/api/chat")).toBeNull();
    expect(screen.queryByText("duplicate seq is dropped")).toBeNull();
  });
});
