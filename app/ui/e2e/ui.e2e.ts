// The web UI in a real browser against a real `mlxr serve` with SmolLM2
// (scripts/ui-e2e.sh). Tests run in order and share one page, so the
// screenshots show the state earlier tests left (a chat, a pulled model,
// metrics after traffic).
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import type { Browser, BrowserContext, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  EMBED_MODEL,
  FLOAT_SOURCE,
  FOLDER_SOURCE,
  IMPORT_SOURCE,
  MODEL,
  post,
  PULL_SOURCE,
  screenshot,
  sleep,
  TOOL_MODEL,
  URL,
  launch,
  newContext,
  watchErrors,
} from "./browser";

/** A tiny GGUF (1.5 MB) to drop on the models page. */
const TINY_GGUF = new globalThis.URL("../../../tests/fixtures/tiny-models/gguf/llama.f32.gguf", import.meta.url);

let browser: Browser;
let context: BrowserContext;
let page: Page;
let errors: string[];
const shots: string[] = [];

beforeAll(async () => {
  browser = await launch();
  context = await newContext(browser, "light");
  page = await context.newPage();
  errors = watchErrors(page);
});

// A page that crashed shows the error boundary, not an uncaught error.
afterEach(async () => {
  const crash = page.getByRole("alert").filter({ hasText: "Something went wrong" });
  if (await crash.count()) throw new Error(`the app crashed: ${await crash.innerText()}`);
});

afterAll(async () => {
  await browser?.close();
  if (shots.length) console.log(`screenshots:\n  ${shots.join("\n  ")}`);
});

/** Screenshots in the light theme, then dark (the header's toggle: light -> dark -> system -> light). */
async function shootBothThemes(name: string) {
  const toggle = page.getByRole("button", { name: /^Theme: / });
  shots.push(await screenshot(page, `${name}-light`));
  await toggle.click();
  await page.waitForFunction(() => document.documentElement.dataset.theme === "dark");
  shots.push(await screenshot(page, `${name}-dark`));
  await toggle.click();
  await toggle.click();
  await page.waitForFunction(() => document.documentElement.dataset.theme === "light");
}

/** Picks the first option starting with `prefix` in the Model select inside `scope`. */
async function pickModel(scope: Locator | Page, prefix: string) {
  const select = scope.getByRole("combobox", { name: "Model" });
  const option = select.locator(`option[value^="${prefix}"]`).first();
  await option.waitFor({ state: "attached" });
  await select.selectOption((await option.getAttribute("value")) ?? "");
}

type Recorder = { lengths: number[]; observer?: MutationObserver };

/**
 * Starts recording, in the page, the text length of the newest assistant
 * message at every DOM change; `stopRecording` returns the distinct lengths.
 * (Polling from the test misses steps when a reply takes well under a second.)
 */
async function startRecording() {
  await page.evaluate(() => {
    const w = window as unknown as { replyRecorder?: Recorder };
    w.replyRecorder?.observer?.disconnect();
    const rec: Recorder = { lengths: [] };
    rec.observer = new MutationObserver(() => {
      const all = document.querySelectorAll('article[aria-label="Assistant"]');
      const n = all[all.length - 1]?.querySelector(".markdown")?.textContent?.length ?? 0;
      if (n && rec.lengths[rec.lengths.length - 1] !== n) rec.lengths.push(n);
    });
    rec.observer.observe(document.body, { childList: true, subtree: true, characterData: true });
    w.replyRecorder = rec;
  });
}

async function stopRecording(): Promise<number[]> {
  return page.evaluate(() => {
    const rec = (window as unknown as { replyRecorder: Recorder }).replyRecorder;
    rec.observer?.disconnect();
    return rec.lengths;
  });
}

describe("chat", () => {
  it("streams a reply to a message", async () => {
    await page.goto("/ui/chat");
    await pickModel(page, MODEL);
    // The daemon's default is no token limit at temperature 0.8: a sampled
    // reply may ramble for minutes on a slow host, so this one is bounded.
    await page.getByText("System prompt and sampling").click();
    await page.getByRole("spinbutton", { name: "Max tokens" }).fill("96");
    await page.getByRole("spinbutton", { name: "Seed" }).fill("7");
    await page.getByText("System prompt and sampling").click();
    await page.getByRole("textbox", { name: "Message" }).fill("Write one sentence about the sea.");
    await startRecording();
    const started = Date.now();
    await page.getByRole("button", { name: "Send" }).click();
    const stats = page.getByLabel("Reply statistics");
    await stats.waitFor({ timeout: 60_000 });
    const lengths = await stopRecording();
    const text = await page.getByRole("article", { name: "Assistant" }).last().innerText();
    console.log(`chat reply in ${Date.now() - started} ms, ${lengths.length} visible updates: ${await stats.innerText()}`);
    expect(lengths.length, "the reply grew in several steps (streamed)").toBeGreaterThan(2);
    expect(text.length).toBeGreaterThan(10);
    expect(await stats.innerText()).toMatch(/tokens\/s/);
  });

  it("every page is reachable from the nav after a reply", async () => {
    const nav = page.getByRole("navigation", { name: "Pages" });
    for (const name of ["Playground", "Models", "Metrics", "Settings", "Logs", "Chat"]) {
      await nav.getByRole("link", { name }).click();
      await nav.locator('a[aria-current="page"]', { hasText: name }).waitFor();
      if (name === "Chat") await page.getByLabel("Reply statistics").waitFor();
      else await page.getByRole("heading", { level: 1, name }).waitFor();
      expect(await page.getByText("Something went wrong").count(), `no crash on ${name}`).toBe(0);
    }
  });

  it("Stop ends a long reply mid-way", async () => {
    await page.getByText("System prompt and sampling").click();
    await page.getByRole("spinbutton", { name: "Max tokens" }).fill("2000");
    await page.getByRole("spinbutton", { name: "Temperature" }).fill("0.8");
    await page.getByRole("spinbutton", { name: "Seed" }).fill("");
    await page.getByText("System prompt and sampling").click();
    const stop = page.getByRole("button", { name: "Stop" });
    // A small model may end a reply on its own within a second: try a few prompts.
    for (const prompt of ["Write a long story about a dragon and a knight.", "List 100 fruits, one per line.", "Explain the history of Rome in detail."]) {
      const replies = await page.getByRole("article", { name: "Assistant" }).count();
      await page.getByRole("textbox", { name: "Message" }).fill(prompt);
      await page.getByRole("button", { name: "Send" }).click();
      const reply = page.getByRole("article", { name: "Assistant" }).nth(replies);
      await page.waitForFunction(
        (n) => (document.querySelectorAll('article[aria-label="Assistant"]')[n]?.querySelector(".markdown")?.textContent?.length ?? 0) > 10,
        replies,
      );
      const stopped = await stop.click({ timeout: 2000 }).then(
        () => true,
        () => false,
      );
      if (!stopped) continue;
      await reply.getByText("Stopped.").waitFor();
      const length = (await reply.innerText()).length;
      await sleep(1000);
      expect((await reply.innerText()).length, "nothing arrives after Stop").toBe(length);
      expect(await reply.getByLabel("Reply statistics").count(), "the reply did not finish").toBe(0);
      expect(await page.getByRole("button", { name: "Send" }).isVisible()).toBe(true);
      await shootBothThemes("chat");
      return;
    }
    throw new Error("every reply ended before Stop could be clicked");
  });
});

const WEATHER_TOOL = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "The city name" } },
        required: ["city"],
      },
    },
  },
];

describe("tool calling", () => {
  it("shows a tool call, then replies to a result answered by hand", async (ctx) => {
    if (!TOOL_MODEL) {
      expect(process.env.MLXR_REQUIRE_MODELS, "MLXR_REQUIRE_MODELS=1 needs Qwen2.5-Coder-0.5B").not.toBe("1");
      console.warn("SKIPPED: tool calling (no Qwen2.5-Coder-0.5B: scripts/fetch-models.sh qwen-coder-0.5b)");
      ctx.skip();
    }
    await page.goto("/ui/chat");
    await page.getByRole("button", { name: "New chat" }).click();
    await pickModel(page, TOOL_MODEL);
    await page.getByText("System prompt and sampling").click();
    await page.getByRole("spinbutton", { name: "Temperature" }).fill("0");
    await page.getByRole("spinbutton", { name: "Max tokens" }).fill("200");
    await page.getByRole("textbox", { name: /^Tools/ }).fill(JSON.stringify(WEATHER_TOOL, null, 2));
    expect(await page.locator("#tools-error").count(), "the tools are valid").toBe(0);
    await page.getByText("System prompt and sampling").click();

    const replies = page.getByRole("article", { name: "Assistant" });
    await page.getByRole("textbox", { name: "Message" }).fill("What is the weather like in Paris today?");
    const started = Date.now();
    await page.getByRole("button", { name: "Send" }).click();
    const call = page.getByRole("region", { name: "Tool call get_weather" });
    await call.waitFor({ timeout: 120_000 });
    const args = JSON.parse(await call.locator("pre").innerText()) as { city?: string };
    console.log(`tool call in ${Date.now() - started} ms: get_weather(${JSON.stringify(args)})`);
    expect(args.city).toMatch(/Paris/);
    await replies.first().getByLabel("Reply statistics").waitFor({ timeout: 60_000 });

    await page.getByRole("textbox", { name: "Result of get_weather" }).fill('{"temperature_c": 21, "sky": "sunny"}');
    await page.getByRole("button", { name: "Send result" }).click();
    await page.getByRole("article", { name: "Tool result get_weather" }).waitFor();
    const next = replies.nth(1);
    await next.getByLabel("Reply statistics").waitFor({ timeout: 120_000 });
    console.log(`after the tool result: ${(await next.innerText()).replace(/\s+/g, " ").slice(0, 200)}`);
    expect((await next.innerText()).trim().length).toBeGreaterThan(0);
    await shootBothThemes("chat-tools");
  }, 300_000);
});

/** Starts recording, in the page, every `value/max` the progress bar labelled `label` shows. */
async function recordBar(label: string) {
  await page.evaluate((label) => {
    const seen: string[] = [];
    (window as unknown as { barSeen: string[] }).barSeen = seen;
    new MutationObserver(() => {
      const bar = document.querySelector(`progress[aria-label="${label}"]`) as HTMLProgressElement | null;
      if (bar) seen.push(`${bar.value}/${bar.max}`);
    }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
  }, label);
}

/** The distinct values the recorded bar showed part way (done below its maximum). */
async function partialBarValues(): Promise<{ partial: string[]; seen: string[] }> {
  const seen = await page.evaluate(() => (window as unknown as { barSeen: string[] }).barSeen);
  const partial = [...new Set(seen)].filter((v) => {
    const [done = 0, max = 0] = v.split("/").map(Number);
    return done > 0 && done < max;
  });
  return { partial, seen };
}

describe("models", () => {
  it("pulls a local file with progress", async () => {
    expect(PULL_SOURCE, "MLXR_E2E_PULL_SOURCE names a GGUF file").not.toBe("");
    await page.goto("/ui/models");
    await page.getByRole("rowheader", { name: new RegExp(`^${MODEL}`) }).waitFor();
    // Record every progress value the bar shows (a local pull is quick).
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { progressSeen: string[] }).progressSeen = seen;
      new MutationObserver(() => {
        const bar = document.querySelector('progress[aria-label="Pull progress"]') as HTMLProgressElement | null;
        if (bar) seen.push(`${bar.value}/${bar.max}`);
      }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await page.getByRole("textbox", { name: "Model name" }).fill(PULL_SOURCE);
    const started = Date.now();
    await page.getByRole("button", { name: "Pull" }).click();
    await page.getByRole("status").filter({ hasText: /^Pulled / }).waitFor({ timeout: 60_000 });
    const seen = await page.evaluate(() => (window as unknown as { progressSeen: string[] }).progressSeen);
    const determinate = [...new Set(seen)].filter((v) => /^[1-9]\d*\/\d+$/.test(v) && !v.endsWith("/1"));
    console.log(`pull took ${Date.now() - started} ms; the bar showed ${determinate.length} byte counts, ${determinate[0]} .. ${determinate.at(-1)}`);
    expect(determinate.length, `the bar showed bytes done (saw ${seen.join(" ")})`).toBeGreaterThan(0);
    await page.getByRole("rowheader", { name: /^e2e-pull/ }).waitFor();
    await shootBothThemes("models");
  });

  it("quantizes a float model as a job, with progress", async () => {
    expect(FLOAT_SOURCE, "MLXR_E2E_FLOAT_SOURCE names a float GGUF file").not.toBe("");
    await post("/api/pull", { model: FLOAT_SOURCE, stream: false });
    await page.goto("/ui/models");
    await page.getByRole("button", { name: /^Details of e2e-f16/ }).click();
    const form = page.getByRole("form", { name: "Quantize" });
    await form.getByRole("combobox", { name: "Type" }).selectOption("Q4_K_M");
    await expect.poll(() => form.getByRole("textbox", { name: "New model name" }).inputValue()).toBe("e2e-f16-q4_k_m");
    await recordBar("Quantize progress");
    await form.getByRole("button", { name: "Quantize" }).click();
    await form.getByRole("status").filter({ hasText: /^Quantized e2e-f16/ }).waitFor({ timeout: 120_000 });
    const { partial, seen } = await partialBarValues();
    expect(partial.length, `the bar showed tensors done (saw ${seen.join(" ")})`).toBeGreaterThan(0);
    await page.getByRole("rowheader", { name: /^e2e-f16-q4_k_m/ }).waitFor();
    const shown = (await post("/api/show", { model: "e2e-f16-q4_k_m" })) as { details: { quantization_level: string } };
    expect(shown.details.quantization_level).toBe("Q4_K_M");
  });

  it("imports a GGUF file from the file picker: hashed, uploaded with progress, registered", async () => {
    expect(IMPORT_SOURCE, "MLXR_E2E_IMPORT_SOURCE names a GGUF file the daemon does not have").not.toBe("");
    await page.goto("/ui/models");
    const form = page.getByRole("form", { name: "Import" });
    await form.getByLabel("GGUF file").setInputFiles(IMPORT_SOURCE);
    await form.getByRole("textbox", { name: "Import as" }).fill("e2e-imported");
    await recordBar("Upload progress");
    const started = Date.now();
    await form.getByRole("button", { name: "Import" }).click();
    await page.getByRole("status").filter({ hasText: /^Imported e2e-imported/ }).waitFor({ timeout: 120_000 });
    const { partial, seen } = await partialBarValues();
    console.log(`import of ${statSync(IMPORT_SOURCE).size} bytes took ${Date.now() - started} ms; the upload bar showed ${partial.length} partial values`);
    expect(partial.length, `the upload bar showed bytes sent (saw ${seen.join(" ")})`).toBeGreaterThan(0);
    await page.getByRole("rowheader", { name: /^e2e-imported/ }).waitFor();
    // The blob is the file's bytes: its SHA-256 as computed here.
    const shown = (await post("/api/show", { model: "e2e-imported" })) as { details: { format: string } };
    expect(shown.details.format).toBe("gguf");
    const digest = `sha256:${createHash("sha256").update(readFileSync(IMPORT_SOURCE)).digest("hex")}`;
    const head = await fetch(`${URL}/api/blobs/${digest}`, { method: "HEAD" });
    expect(head.status).toBe(200);
  });

  it("imports a GGUF file dropped on the page", async () => {
    await page.goto("/ui/models");
    const bytes = readFileSync(TINY_GGUF).toString("base64");
    const transfer = await page.evaluateHandle((b64) => {
      const data = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([data], "Tiny Llama.F32.gguf"));
      return dt;
    }, bytes);
    const panel = page.getByRole("region", { name: "Import a GGUF file" });
    await panel.dispatchEvent("dragover", { dataTransfer: transfer });
    await panel.dispatchEvent("drop", { dataTransfer: transfer });
    const name = page.getByRole("textbox", { name: "Import as" });
    await expect.poll(() => name.inputValue()).toBe("tiny-llama.f32");
    await page.getByRole("form", { name: "Import" }).getByRole("button", { name: "Import" }).click();
    await page.getByRole("status").filter({ hasText: /^Imported tiny-llama.f32/ }).waitFor({ timeout: 60_000 });
    await page.getByRole("rowheader", { name: /^tiny-llama.f32/ }).waitFor();
  });

  it("converts a folder model to GGUF as a job, with progress", async () => {
    expect(FOLDER_SOURCE, "MLXR_E2E_FOLDER_SOURCE names a Hugging Face folder").not.toBe("");
    await post("/api/pull", { model: FOLDER_SOURCE, stream: false });
    await page.goto("/ui/models");
    await page.getByRole("button", { name: /^Details of e2e-hf/ }).click();
    const form = page.getByRole("form", { name: "Convert to GGUF" });
    await form.getByRole("combobox", { name: "Out type" }).selectOption("q8_0");
    await expect.poll(() => form.getByRole("textbox", { name: "New model name" }).inputValue()).toBe("e2e-hf-gguf-q8_0");
    await recordBar("Convert progress");
    await form.getByRole("button", { name: "Convert" }).click();
    await form.getByRole("status").filter({ hasText: /^Converted e2e-hf/ }).waitFor({ timeout: 120_000 });
    const { partial, seen } = await partialBarValues();
    expect(partial.length, `the bar showed tensors done (saw ${seen.join(" ")})`).toBeGreaterThan(0);
    await page.getByRole("rowheader", { name: /^e2e-hf-gguf-q8_0/ }).waitFor();
    const shown = (await post("/api/show", { model: "e2e-hf-gguf-q8_0" })) as { details: { format: string; quantization_level: string } };
    expect([shown.details.format, shown.details.quantization_level]).toEqual(["gguf", "Q8_0"]);
    await shootBothThemes("models-convert");
  });

  it("converts a GGUF model to a Hugging Face folder as a job", async () => {
    await page.goto("/ui/models");
    await page.getByRole("button", { name: "Details of tiny-llama.f32:latest" }).click();
    const form = page.getByRole("form", { name: "Convert to a Hugging Face folder" });
    await form.getByRole("combobox", { name: "Out type" }).selectOption("f16");
    await expect.poll(() => form.getByRole("textbox", { name: "New model name" }).inputValue()).toBe("tiny-llama.f32-hf-f16");
    await form.getByRole("button", { name: "Convert" }).click();
    await form.getByRole("status").filter({ hasText: /^Converted tiny-llama.f32/ }).waitFor({ timeout: 60_000 });
    await page.getByRole("rowheader", { name: /^tiny-llama.f32-hf-f16/ }).waitFor();
    const shown = (await post("/api/show", { model: "tiny-llama.f32-hf-f16" })) as { details: { format: string; quantization_level: string } };
    expect([shown.details.format, shown.details.quantization_level]).toEqual(["safetensors", "F16"]);
  });
});

describe("metrics", () => {
  it("charts change after traffic", async () => {
    await page.goto("/ui/metrics");
    const latest = page.getByLabel("Generated tokens/s: latest value");
    await latest.waitFor();
    const pathBefore = await page.locator(".chart path").count();
    const traffic = (async () => {
      const until = Date.now() + 9000;
      while (Date.now() < until) {
        await Promise.all([
          ...[0, 1].map((i) =>
            post("/api/generate", { model: MODEL, prompt: `Tell a story number ${i}.`, stream: false, options: { num_predict: 40 } }),
          ),
          // Prompt lookup on a reply that repeats its prompt: drafts stand.
          post("/api/generate", {
            model: MODEL,
            prompt: "Repeat this list exactly, twice: apple, banana, cherry, date, elderberry, fig, grape.",
            stream: false,
            // "max": drafts whatever the step timings say (goodput, the
            // default, could find them not worth it on a loaded machine).
            options: { num_predict: 40, temperature: 0, "speculative.type": "ngram", "speculative.draft_length": "max" },
          }),
        ]);
      }
    })();
    // Both while the traffic goes on (an interval without drafts shows —).
    const shows = (label: string, above: number) =>
      page.waitForFunction(
        ([l, a]) => {
          const v = document.querySelector(`[aria-label="${l}: latest value"]`)?.textContent ?? "";
          return Number.parseFloat(v) > (a as number);
        },
        [label, above] as const,
        { timeout: 20_000 },
      );
    await Promise.all([shows("Generated tokens/s", 0), shows("Mean accepted length", 1)]);
    console.log(`tokens/s shown: ${await latest.innerText()}`);
    console.log(`mean accepted length shown: ${await page.getByLabel("Mean accepted length: latest value").innerText()}`);
    expect(await page.locator(".chart path").count()).toBeGreaterThan(pathBefore);
    // Two more samples while the traffic goes on, for the screenshots.
    await sleep(4200);
    await shootBothThemes("metrics");
    await traffic;
  });
});

describe("logs", () => {
  it("shows new lines after a request", async () => {
    await page.goto("/ui/logs");
    const log = page.getByRole("log", { name: "Server log" });
    // Any line: the server's first ones ("listening on") may have left its
    // 1,000-line buffer by now, after the metrics test's traffic.
    await log.locator(".log-line").first().waitFor();
    await page.getByRole("status").filter({ hasText: "Live" }).waitFor();
    const showLines = () =>
      page.evaluate(
        () => [...document.querySelectorAll(".log-line .log-message")].filter((e) => e.textContent?.includes("path=/api/show")).length,
      );
    const before = await showLines();
    await post("/api/show", { model: MODEL });
    await page.waitForFunction(
      (n) =>
        [...document.querySelectorAll(".log-line .log-message")].filter((e) => e.textContent?.includes("path=/api/show")).length > n,
      before,
      { timeout: 10_000 },
    );
    // Paused: a new request's line waits until Resume.
    await page.getByRole("button", { name: "Pause" }).click();
    await post("/api/show", { model: MODEL });
    await page.getByRole("status").filter({ hasText: /Paused — \d+ new/ }).waitFor();
    expect(await showLines(), "no new line while paused").toBe(before + 1);
    await page.getByRole("button", { name: "Resume" }).click();
    await page.waitForFunction(
      (n) =>
        [...document.querySelectorAll(".log-line .log-message")].filter((e) => e.textContent?.includes("path=/api/show")).length > n,
      before + 1,
    );
    const atBottom = await log.evaluate((el) => Math.abs(el.scrollHeight - el.clientHeight - el.scrollTop) < 4);
    expect(atBottom, "auto-scroll keeps the newest line in view").toBe(true);
    await shootBothThemes("logs");
  });
});

describe("playground", () => {
  it("shows a completion's tokens with logprobs and alternatives", async () => {
    await page.goto("/ui/playground");
    const panel = page.getByRole("region", { name: "Completion with logprobs" });
    await pickModel(panel, MODEL);
    await panel.getByRole("button", { name: "Complete" }).click();
    const tokens = panel.getByRole("list", { name: "Generated tokens with logprobs" }).getByRole("button");
    await tokens.first().waitFor();
    expect(await tokens.count()).toBeGreaterThan(1);
    expect(await tokens.first().getAttribute("aria-label")).toMatch(/^Token ".*", logprob -?\d+\.\d{3}$/);
    await tokens.nth(1).focus();
    const rows = panel.getByRole("region", { name: "Token alternatives" }).getByRole("row");
    await rows.nth(2).waitFor();
    expect(await rows.count()).toBeGreaterThan(2);
  });

  it("compares embeddings, and explains a model that cannot embed", async () => {
    const panel = page.getByRole("region", { name: "Embeddings: cosine similarity" });
    if (!EMBED_MODEL) {
      expect(process.env.MLXR_REQUIRE_MODELS, "MLXR_REQUIRE_MODELS=1 needs the embedding model").not.toBe("1");
      console.warn("SKIPPED: the embeddings matrix check (no all-MiniLM-L6-v2: scripts/fetch-models.sh minilm)");
    } else {
      await pickModel(panel, EMBED_MODEL);
      await panel.getByRole("button", { name: "Compare" }).click();
      const matrix = panel.getByRole("table", { name: "Cosine similarity matrix" });
      await matrix.waitFor();
      const cells = await matrix.getByRole("cell").allInnerTexts();
      const values = cells.filter(Boolean).map(Number);
      expect(values).toHaveLength(9);
      expect(values[0]).toBeCloseTo(1, 3);
      // The two cat sentences are closer than a cat and the stock market.
      expect(values[1]!).toBeGreaterThan(values[2]!);
    }
    await shootBothThemes("playground");
    await pickModel(panel, MODEL);
    await panel.getByRole("button", { name: "Compare" }).click();
    const alert = panel.getByRole("alert");
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/does not support embeddings.*Models page/s);
  });
});

describe("playground constraint", () => {
  it("a JSON schema constraint gives JSON that matches it", async () => {
    await page.goto("/ui/playground");
    const panel = page.getByRole("region", { name: "Completion with logprobs" });
    await pickModel(panel, MODEL);
    await panel.getByRole("spinbutton", { name: "Max tokens" }).fill("64");
    await panel.getByRole("textbox", { name: "Prompt" }).fill("Is the sky blue? Answer as JSON: ");
    await panel.getByRole("combobox", { name: "Constraint type" }).selectOption("json");
    const schema = { type: "object", properties: { answer: { type: "string", enum: ["yes", "no"] } }, required: ["answer"] };
    await panel.getByRole("textbox", { name: "JSON schema" }).fill(JSON.stringify(schema));
    await panel.getByRole("button", { name: "Complete" }).click();
    const text = panel.locator(".completion-text strong");
    await text.waitFor({ timeout: 60_000 });
    const completion = await text.innerText();
    console.log(`constrained completion: ${completion}`);
    const parsed = JSON.parse(completion) as { answer?: string };
    expect(["yes", "no"]).toContain(parsed.answer);
    await shootBothThemes("playground-constraint");
  }, 120_000);
});

describe("settings", () => {
  it("shows the server configuration and changes the keep-alive", async () => {
    await page.goto("/ui/settings");
    const listen = page.getByRole("region", { name: "Listening" });
    await listen.waitFor();
    expect(await listen.innerText()).toContain(new globalThis.URL(URL).host);
    expect(await page.getByRole("region", { name: "Security" }).innerText()).toMatch(/API key set\s*no/);
    // The default keep-alive changes while the daemon runs.
    const form = page.getByRole("region", { name: "Default keep-alive" });
    await form.getByRole("textbox", { name: "Keep models loaded after a request for" }).fill("10m");
    await form.getByRole("button", { name: "Save" }).click();
    await form.getByRole("status").filter({ hasText: "Saved: 10m." }).waitFor();
    const config = (await (await fetch(`${URL}/api/mlxr/config`)).json()) as { models: { keep_alive: string } };
    expect(config.models.keep_alive).toBe("10m");
    await shootBothThemes("settings");
  });

  it("left no uncaught page errors", () => {
    expect(errors).toEqual([]);
  });
});
