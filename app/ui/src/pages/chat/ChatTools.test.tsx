import { fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fakeStream, jsonResponse, TAGS } from "../../test/fakeStream";
import { ChatPage } from "./ChatPage";
import { STORAGE_KEY, type Conversation } from "./conversations";

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

function mockDaemon() {
  const chat = { streams: [] as ReturnType<typeof fakeStream>[], bodies: [] as Record<string, unknown>[] };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      if (url === "/api/tags") return jsonResponse(TAGS);
      if (url === "/api/chat") {
        const stream = fakeStream(init.signal);
        chat.bodies.push(JSON.parse(String(init.body)) as Record<string, unknown>);
        chat.streams.push(stream);
        return stream.response;
      }
      return jsonResponse({ error: `unexpected ${url}` }, 404);
    }),
  );
  return chat;
}

function saveConversation(tools: string) {
  const c: Conversation = {
    id: "c1",
    title: "Weather",
    model: "smollm2:135m",
    system: "",
    options: { temperature: 0 },
    tools,
    messages: [],
    updatedAt: 1,
  };
  localStorage.setItem(STORAGE_KEY, JSON.stringify([c]));
}

const chunk = (message: Record<string, unknown>, done = false) =>
  JSON.stringify({ message: { role: "assistant", content: "", ...message }, done }) + "\n";
const CALL = { id: "call_1", function: { index: 0, name: "get_weather", arguments: { city: "Paris" } } };

async function send(text: string) {
  render(<ChatPage />);
  await screen.findByRole("option", { name: "smollm2:135m" });
  fireEvent.change(screen.getByRole("textbox", { name: "Message" }), { target: { value: text } });
  fireEvent.click(screen.getByRole("button", { name: "Send" }));
}

describe("ChatPage tools", () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => vi.unstubAllGlobals());

  it("sends tools, shows a streamed tool call, and sends a result answered by hand", async () => {
    saveConversation(JSON.stringify(TOOLS));
    const chat = mockDaemon();
    await send("What is the weather in Paris?");
    await vi.waitFor(() => expect(chat.streams).toHaveLength(1));
    expect(chat.bodies[0]).toMatchObject({ tools: TOOLS, options: { temperature: 0 } });

    chat.streams[0]!.push(chunk({ content: "Let me check." }));
    expect(await screen.findByText("Let me check.")).toBeTruthy();
    chat.streams[0]!.push(chunk({ tool_calls: [CALL] }));
    const call = await screen.findByRole("region", { name: "Tool call get_weather" });
    expect(within(call).getByText("get_weather")).toBeTruthy();
    expect(call.querySelector("pre")?.textContent).toBe('{\n  "city": "Paris"\n}');
    expect(screen.getByText("Let me check.")).toBeTruthy();
    // No answer form while the reply streams.
    expect(screen.queryByRole("button", { name: "Send result" })).toBeNull();

    chat.streams[0]!.push(JSON.stringify({ done: true, done_reason: "stop", eval_count: 12, eval_duration: 1e9 }) + "\n");
    chat.streams[0]!.close();
    const result = await screen.findByRole("textbox", { name: "Result of get_weather" });
    fireEvent.change(result, { target: { value: '{"temperature": 21, "sky": "sunny"}' } });
    fireEvent.click(screen.getByRole("button", { name: "Send result" }));

    await vi.waitFor(() => expect(chat.streams).toHaveLength(2));
    expect(chat.bodies[1]?.messages).toEqual([
      { role: "user", content: "What is the weather in Paris?" },
      { role: "assistant", content: "Let me check.", tool_calls: [CALL] },
      { role: "tool", content: '{"temperature": 21, "sky": "sunny"}', tool_name: "get_weather" },
    ]);
    expect(chat.bodies[1]?.tools).toEqual(TOOLS);
    const tool = screen.getByRole("article", { name: "Tool result get_weather" });
    expect(within(tool).getByText('{"temperature": 21, "sky": "sunny"}')).toBeTruthy();
    expect(screen.queryByRole("button", { name: "Send result" })).toBeNull();

    chat.streams[1]!.push(chunk({ content: "It is sunny in Paris." }));
    chat.streams[1]!.push(JSON.stringify({ done: true, eval_count: 6, eval_duration: 1e9 }) + "\n");
    chat.streams[1]!.close();
    expect(await screen.findByText("It is sunny in Paris.")).toBeTruthy();
    await vi.waitFor(() => {
      const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "[]") as Conversation[];
      expect(saved[0]?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    });
  });

  it("answers several calls in order and replies after the last", async () => {
    saveConversation(JSON.stringify(TOOLS));
    const chat = mockDaemon();
    await send("Weather in Paris and Rome?");
    await vi.waitFor(() => expect(chat.streams).toHaveLength(1));
    const rome = { function: { index: 1, name: "get_time", arguments: { city: "Rome" } } };
    chat.streams[0]!.push(chunk({ tool_calls: [CALL] }) + chunk({ tool_calls: [rome] }));
    chat.streams[0]!.push(JSON.stringify({ done: true }) + "\n");
    chat.streams[0]!.close();
    expect(await screen.findByRole("region", { name: "Tool call get_time" })).toBeTruthy();

    fireEvent.change(await screen.findByRole("textbox", { name: "Result of get_weather" }), { target: { value: "sunny" } });
    fireEvent.click(screen.getByRole("button", { name: "Send result" }));
    fireEvent.change(await screen.findByRole("textbox", { name: "Result of get_time" }), { target: { value: "noon" } });
    expect(chat.streams).toHaveLength(1);
    fireEvent.click(screen.getByRole("button", { name: "Send result" }));
    await vi.waitFor(() => expect(chat.streams).toHaveLength(2));
    const messages = chat.bodies[1]?.messages as { role: string; tool_name?: string; content: string }[];
    expect(messages.slice(2)).toEqual([
      { role: "tool", content: "sunny", tool_name: "get_weather" },
      { role: "tool", content: "noon", tool_name: "get_time" },
    ]);
  });

  it("validates the Tools box and sends no tools when it is empty", async () => {
    saveConversation("");
    const chat = mockDaemon();
    render(<ChatPage />);
    await screen.findByRole("option", { name: "smollm2:135m" });
    const box = screen.getByRole("textbox", { name: /^Tools/ });
    fireEvent.change(screen.getByRole("textbox", { name: "Message" }), { target: { value: "Hi" } });

    fireEvent.change(box, { target: { value: "[{" } });
    expect(screen.getByText(/^Tools: not valid JSON/)).toBeTruthy();
    expect(box.getAttribute("aria-invalid")).toBe("true");
    expect((screen.getByRole("button", { name: "Send" }) as HTMLButtonElement).disabled).toBe(true);
    fireEvent.change(box, { target: { value: '{"type": "function"}' } });
    expect(screen.getByText("Tools: expected a JSON array of tool definitions")).toBeTruthy();
    fireEvent.change(box, { target: { value: '[{"type": "function", "function": {"description": "x"}}]' } });
    expect(screen.getByText("Tools: item 1 has no function.name")).toBeTruthy();
    fireEvent.change(box, { target: { value: "[42]" } });
    expect(screen.getByText("Tools: item 1 is not an object")).toBeTruthy();

    fireEvent.change(box, { target: { value: "  " } });
    expect(screen.queryByText(/^Tools:/)).toBeNull();
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    await vi.waitFor(() => expect(chat.bodies).toHaveLength(1));
    expect(chat.bodies[0]).not.toHaveProperty("tools");

    await vi.waitFor(() => {
      const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "[]") as Conversation[];
      expect(saved[0]?.tools).toBe("  ");
    });
  });
});
