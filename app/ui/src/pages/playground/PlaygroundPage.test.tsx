import { fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonResponse, TAGS } from "../../test/fakeStream";
import { PlaygroundPage } from "./PlaygroundPage";

const MODELS = {
  models: [
    ...TAGS.models,
    { ...TAGS.models[0], name: "all-minilm", model: "all-minilm", details: { family: "bert", format: "safetensors" } },
  ],
};

const COMPLETION = {
  choices: [
    {
      text: " Paris.",
      finish_reason: "stop",
      logprobs: {
        tokens: [" Paris", "."],
        token_logprobs: [-0.105, -1.2],
        top_logprobs: [
          { " Paris": -0.105, " Lyon": -2.5, " the": -3.1 },
          { ".": -1.2, ",": -0.9 },
        ],
        text_offset: [0, 6],
      },
    },
  ],
  usage: { prompt_tokens: 5, completion_tokens: 2 },
};

function mockDaemon(embeddings: (body: { model: string; input: string[] }) => Response) {
  const calls: { url: string; body: unknown }[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init: RequestInit = {}) => {
      const body = init.body ? (JSON.parse(String(init.body)) as { model: string; input: string[] }) : null;
      calls.push({ url, body });
      if (url === "/api/tags") return jsonResponse(MODELS);
      if (url === "/v1/completions") return jsonResponse(COMPLETION);
      if (url === "/v1/embeddings" && body) return embeddings(body);
      return jsonResponse({ error: `unexpected ${url}` }, 404);
    }),
  );
  return calls;
}

describe("PlaygroundPage", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("shows each token's logprob and its alternatives on focus", async () => {
    const calls = mockDaemon(() => jsonResponse({}));
    render(<PlaygroundPage />);
    const completion = screen.getByRole("region", { name: "Completion with logprobs" });
    await within(completion).findByRole("option", { name: "smollm2:135m" });
    fireEvent.click(within(completion).getByRole("button", { name: "Complete" }));
    const token = await screen.findByRole("button", { name: 'Token " Paris", logprob -0.105' });
    expect(calls.find((c) => c.url === "/v1/completions")?.body).toMatchObject({
      model: "smollm2:135m",
      prompt: "The capital of France is",
      logprobs: 5,
      temperature: 0,
      stream: false,
    });
    expect(token.textContent).toBe("·Paris-0.10");
    fireEvent.focus(token);
    const alternatives = screen.getByRole("region", { name: "Token alternatives" });
    const rows = within(alternatives).getAllByRole("row").slice(1);
    expect(rows.map((r) => within(r).getByRole("rowheader").textContent)).toEqual(["·Paris", "·Lyon", "·the"]);
    expect(rows[0]?.textContent).toContain("90.0 %");
    fireEvent.keyDown(token, { key: "ArrowRight" });
    expect(document.activeElement?.id).toBe("token-1");
  });

  it("computes the cosine-similarity matrix of several texts", async () => {
    const vectors: Record<string, number[]> = { a: [1, 0], b: [0.6, 0.8], c: [0, 1] };
    const calls = mockDaemon(({ input }) =>
      jsonResponse({ model: "all-minilm", data: input.map((t, index) => ({ index, embedding: vectors[t] })) }),
    );
    render(<PlaygroundPage />);
    const panel = screen.getByRole("region", { name: "Embeddings: cosine similarity" });
    await within(panel).findByRole("option", { name: "all-minilm" });
    fireEvent.change(within(panel).getByRole("textbox", { name: "Texts (one per line)" }), {
      target: { value: "a\nb\n\nc" },
    });
    fireEvent.click(within(panel).getByRole("button", { name: "Compare" }));
    const table = await screen.findByRole("table", { name: "Cosine similarity matrix" });
    expect(calls.find((c) => c.url === "/v1/embeddings")?.body).toEqual({ model: "all-minilm", input: ["a", "b", "c"] });
    const cells = within(table).getAllByRole("cell").map((c) => c.textContent);
    expect(cells.filter(Boolean)).toEqual(["1.000", "0.600", "0.000", "0.600", "1.000", "0.800", "0.000", "0.800", "1.000"]);
  });

  it("explains what to do when the model cannot embed", async () => {
    mockDaemon(({ model }) =>
      jsonResponse({ error: { message: `model '${model}' does not support embeddings`, type: "invalid_request_error" } }, 400),
    );
    render(<PlaygroundPage />);
    const panel = screen.getByRole("region", { name: "Embeddings: cosine similarity" });
    await within(panel).findByRole("option", { name: "all-minilm" });
    fireEvent.change(within(panel).getByRole("combobox", { name: "Model" }), { target: { value: "smollm2:135m" } });
    fireEvent.click(within(panel).getByRole("button", { name: "Compare" }));
    const alert = await within(panel).findByRole("alert");
    expect(alert.textContent).toContain("does not support embeddings");
    expect(alert.textContent).toContain("pull it on the Models page");
  });
});
