import { fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeStream, jsonResponse, TAGS } from "../../test/fakeStream";
import { ChatPage } from "./ChatPage";
import { STORAGE_KEY, type Conversation } from "./conversations";

function mockDaemon() {
  const chat = { stream: null as ReturnType<typeof fakeStream> | null, init: null as RequestInit | null };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      if (url === "/api/tags") return jsonResponse(TAGS);
      if (url === "/api/chat") {
        chat.init = init;
        chat.stream = fakeStream(init.signal);
        return chat.stream.response;
      }
      return jsonResponse({ error: `unexpected ${url}` }, 404);
    }),
  );
  return chat;
}

async function sendMessage(text: string) {
  render(<ChatPage />);
  await screen.findByRole("option", { name: "smollm2:135m" });
  fireEvent.change(screen.getByRole("textbox", { name: "Message" }), { target: { value: text } });
  fireEvent.click(screen.getByRole("button", { name: "Send" }));
}

const line = (content: string) => JSON.stringify({ message: { role: "assistant", content }, done: false }) + "\n";

describe("ChatPage", () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => vi.unstubAllGlobals());

  it("streams a reply token by token and shows its speed", async () => {
    const chat = mockDaemon();
    await sendMessage("Hi there");
    await vi.waitFor(() => expect(chat.stream).not.toBeNull());
    const body = JSON.parse(String(chat.init?.body)) as Record<string, unknown>;
    expect(body).toMatchObject({ model: "smollm2:135m", stream: true, messages: [{ role: "user", content: "Hi there" }] });

    const first = line("Hello");
    chat.stream!.push(first.slice(0, 20));
    chat.stream!.push(first.slice(20) + line(" **world**").slice(0, 5));
    expect(await screen.findByText("Hello")).toBeTruthy();
    chat.stream!.push(line(" **world**").slice(5));
    expect(await screen.findByText("world", { selector: "strong" })).toBeTruthy();

    chat.stream!.push(JSON.stringify({ done: true, done_reason: "stop", eval_count: 10, eval_duration: 2e9 }) + "\n");
    chat.stream!.close();
    const stats = await screen.findByLabelText("Reply statistics");
    expect(stats.textContent).toContain("10 tokens");
    expect(stats.textContent).toContain("5.0 tokens/s");
    expect(stats.textContent).toMatch(/time to first token \d+ ms/);
    expect(screen.getByRole("button", { name: "Send" })).toBeTruthy();

    // Conversations are persisted by an effect after the render that shows the reply.
    await vi.waitFor(() => {
      const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "[]") as Conversation[];
      expect(saved[0]?.title).toBe("Hi there");
      expect(saved[0]?.messages.map((m) => m.content)).toEqual(["Hi there", "Hello **world**"]);
    });
  });

  it("Stop aborts the request and keeps the partial reply", async () => {
    const chat = mockDaemon();
    await sendMessage("Count to 100");
    await vi.waitFor(() => expect(chat.stream).not.toBeNull());
    chat.stream!.push(line("1, 2, 3"));
    expect(await screen.findByText("1, 2, 3")).toBeTruthy();

    fireEvent.click(screen.getByRole("button", { name: "Stop" }));
    expect(chat.init?.signal?.aborted).toBe(true);
    expect(await screen.findByText("Stopped.")).toBeTruthy();
    expect(screen.getByText("1, 2, 3")).toBeTruthy();
    expect(screen.queryByRole("button", { name: "Stop" })).toBeNull();
  });

  it("shows an API error as a readable message", async () => {
    const chat = mockDaemon();
    await sendMessage("Hi");
    await vi.waitFor(() => expect(chat.stream).not.toBeNull());
    chat.stream!.push('{"error":"model \'x\' not found"}\n');
    expect((await screen.findByRole("alert")).textContent).toContain("model 'x' not found");
  });
});
