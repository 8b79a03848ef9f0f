import { fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { App } from "./App";
import { ErrorBoundary } from "./components/ErrorBoundary";
import { fakeStream, jsonResponse, TAGS } from "./test/fakeStream";

/** Every endpoint the pages call on mount; the chat's reply is written by the test. */
function mockDaemon() {
  const chat = { stream: null as ReturnType<typeof fakeStream> | null };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      if (url === "/api/tags") return jsonResponse(TAGS);
      if (url === "/api/chat") {
        chat.stream = fakeStream(init.signal);
        return chat.stream.response;
      }
      if (url === "/metrics") return new Response("", { headers: { "Content-Type": "text/plain" } });
      if (url === "/api/mlxr/config") return jsonResponse({});
      if (url.startsWith("/api/mlxr/logs")) return fakeStream(init.signal).response;
      return jsonResponse({ error: `unexpected ${url}` }, 404);
    }),
  );
  return chat;
}

const line = (content: string) => JSON.stringify({ message: { role: "assistant", content }, done: false }) + "\n";

/** Chromium 156 returns a Promise from scroll methods (CSSOM View "smooth scroll promises"). */
function scrollIntoViewReturnsPromise() {
  const original = Object.getOwnPropertyDescriptor(Element.prototype, "scrollIntoView");
  Element.prototype.scrollIntoView = function scrollIntoView() {
    return Promise.resolve() as unknown as void;
  };
  return () => {
    if (original) Object.defineProperty(Element.prototype, "scrollIntoView", original);
    else delete (Element.prototype as Partial<Element>).scrollIntoView;
  };
}

function expectNoCrash() {
  expect(screen.queryByText("Something went wrong")).toBeNull();
}

describe("App", () => {
  let restoreScroll: () => void;
  beforeEach(() => {
    localStorage.clear();
    window.history.replaceState(null, "", "/ui/chat");
    restoreScroll = scrollIntoViewReturnsPromise();
  });
  afterEach(() => {
    restoreScroll();
    vi.unstubAllGlobals();
  });

  it("chats, then every page is reachable from the nav (scroll methods returning Promises)", async () => {
    const chat = mockDaemon();
    // As main.tsx mounts it, less StrictMode's double effects (a production build has none).
    const app = render(
      <ErrorBoundary>
        <App />
      </ErrorBoundary>,
    );
    await screen.findByRole("option", { name: "smollm2:135m" });
    fireEvent.change(screen.getByRole("textbox", { name: "Message" }), { target: { value: "Hi" } });
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    await vi.waitFor(() => expect(chat.stream).not.toBeNull());
    chat.stream!.push(line("Hello"));
    expect(await screen.findByText("Hello")).toBeTruthy();
    chat.stream!.push(line(" there"));
    chat.stream!.push(JSON.stringify({ done: true, done_reason: "stop", eval_count: 2, eval_duration: 1e9 }) + "\n");
    chat.stream!.close();
    await screen.findByLabelText("Reply statistics");
    expectNoCrash();

    const nav = within(screen.getByRole("navigation", { name: "Pages" }));
    for (const page of ["Playground", "Models", "Metrics", "Settings", "Logs", "Chat"]) {
      fireEvent.click(nav.getByRole("link", { name: page }));
      expect(nav.getByRole("link", { name: page }).getAttribute("aria-current")).toBe("page");
      if (page === "Chat") expect(await screen.findByText("Hello there")).toBeTruthy();
      else expect(await screen.findByRole("heading", { level: 1, name: page })).toBeTruthy();
      expectNoCrash();
    }

    app.unmount();
    expect(document.body.textContent).not.toContain("Something went wrong");
  });
});
