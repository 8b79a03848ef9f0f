import { fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonResponse, TAGS } from "../../test/fakeStream";
import { PlaygroundPage } from "./PlaygroundPage";

const SCHEMA = { type: "object", properties: { answer: { type: "string", enum: ["yes", "no"] } }, required: ["answer"] };

function mockDaemon(completion: (body: Record<string, unknown>) => Response) {
  const bodies: Record<string, unknown>[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      if (url === "/api/tags") return jsonResponse(TAGS);
      if (url === "/v1/completions") {
        const body = JSON.parse(String(init.body)) as Record<string, unknown>;
        bodies.push(body);
        return completion(body);
      }
      return jsonResponse({ error: `unexpected ${url}` }, 404);
    }),
  );
  return bodies;
}

const ANSWER = { choices: [{ text: '{"answer": "yes"}', finish_reason: "stop", logprobs: null }] };

async function renderPanel() {
  render(<PlaygroundPage />);
  const panel = screen.getByRole("region", { name: "Completion with logprobs" });
  await within(panel).findByRole("option", { name: "smollm2:135m" });
  return panel;
}

describe("CompletionPanel constraint", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("sends a JSON schema as response_format, and blocks invalid JSON", async () => {
    const bodies = mockDaemon(() => jsonResponse(ANSWER));
    const panel = await renderPanel();
    expect(within(panel).queryByRole("textbox", { name: "JSON schema" })).toBeNull();
    fireEvent.change(within(panel).getByRole("combobox", { name: "Constraint type" }), { target: { value: "json" } });
    const box = within(panel).getByRole("textbox", { name: "JSON schema" });
    const complete = within(panel).getByRole("button", { name: "Complete" }) as HTMLButtonElement;

    fireEvent.change(box, { target: { value: '{"type": ' } });
    expect(within(panel).getByText(/^JSON schema: not valid JSON/)).toBeTruthy();
    expect(complete.disabled).toBe(true);
    fireEvent.submit(complete.closest("form")!);
    fireEvent.change(box, { target: { value: "[1]" } });
    expect(within(panel).getByText("JSON schema: expected a JSON object")).toBeTruthy();
    expect(bodies).toHaveLength(0);

    fireEvent.change(box, { target: { value: JSON.stringify(SCHEMA) } });
    expect(within(panel).queryByText(/^JSON schema:/)).toBeNull();
    fireEvent.click(complete);
    expect(await within(panel).findByText('{"answer": "yes"}')).toBeTruthy();
    expect(bodies[0]).toMatchObject({
      model: "smollm2:135m",
      response_format: { type: "json_schema", json_schema: { name: "playground", schema: SCHEMA } },
    });
    expect(bodies[0]).not.toHaveProperty("grammar");
  });

  it("sends a regex or a Lark grammar as grammar, and nothing for None", async () => {
    const bodies = mockDaemon(() => jsonResponse(ANSWER));
    const panel = await renderPanel();
    const kind = within(panel).getByRole("combobox", { name: "Constraint type" });
    const complete = within(panel).getByRole("button", { name: "Complete" });

    fireEvent.change(kind, { target: { value: "regex" } });
    fireEvent.change(within(panel).getByRole("textbox", { name: "Regular expression" }), { target: { value: "(yes|no)\\." } });
    fireEvent.click(complete);
    await vi.waitFor(() => expect(bodies).toHaveLength(1));
    expect(bodies[0]?.grammar).toEqual({ type: "regex", value: "(yes|no)\\." });
    expect(bodies[0]).not.toHaveProperty("response_format");

    await within(panel).findByText('{"answer": "yes"}');
    fireEvent.change(kind, { target: { value: "lark" } });
    // The text is kept across kinds.
    const lark = within(panel).getByRole("textbox", { name: "Lark grammar" });
    fireEvent.change(lark, { target: { value: 'start: "yes" | "no"' } });
    fireEvent.click(complete);
    await vi.waitFor(() => expect(bodies).toHaveLength(2));
    expect(bodies[1]?.grammar).toEqual({ type: "lark", value: 'start: "yes" | "no"' });

    await vi.waitFor(() => expect((complete as HTMLButtonElement).disabled).toBe(false));
    fireEvent.change(kind, { target: { value: "none" } });
    fireEvent.click(complete);
    await vi.waitFor(() => expect(bodies).toHaveLength(3));
    expect(bodies[2]).not.toHaveProperty("grammar");
    expect(bodies[2]).not.toHaveProperty("response_format");
  });

  it("shows the server's 400 for a bad grammar", async () => {
    mockDaemon(() =>
      jsonResponse({ error: { message: "regex: unclosed group", type: "invalid_request_error" } }, 400),
    );
    const panel = await renderPanel();
    fireEvent.change(within(panel).getByRole("combobox", { name: "Constraint type" }), { target: { value: "regex" } });
    fireEvent.change(within(panel).getByRole("textbox", { name: "Regular expression" }), { target: { value: "(yes" } });
    fireEvent.click(within(panel).getByRole("button", { name: "Complete" }));
    expect((await within(panel).findByRole("alert")).textContent).toContain("400: regex: unclosed group");
  });
});
