import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

/** Where the daemon under test listens (set by scripts/ui-e2e.sh). */
export const URL = process.env.MLXR_URL ?? "http://127.0.0.1:11435";
export const MODEL = process.env.MLXR_E2E_MODEL ?? "smollm2";
/** A GGUF file to pull from a local path; its stem becomes the model name. */
export const PULL_SOURCE = process.env.MLXR_E2E_PULL_SOURCE ?? "";
/** A GGUF of float weights (the quantize test pulls it from its path). */
export const FLOAT_SOURCE = process.env.MLXR_E2E_FLOAT_SOURCE ?? "";
/** A GGUF file the daemon does not have yet (the import test uploads it from the browser). */
export const IMPORT_SOURCE = process.env.MLXR_E2E_IMPORT_SOURCE ?? "";
/** A Hugging Face folder (the convert test pulls it from its path). */
export const FOLDER_SOURCE = process.env.MLXR_E2E_FOLDER_SOURCE ?? "";
/** The embedding model name, when the daemon serves one. */
export const EMBED_MODEL = process.env.MLXR_E2E_EMBED_MODEL ?? "";
/** A model that calls tools reliably (Qwen2.5-Coder-0.5B), when the daemon serves one. */
export const TOOL_MODEL = process.env.MLXR_E2E_TOOL_MODEL ?? "";
export const SCREENSHOTS = process.env.MLXR_SCREENSHOTS ?? join(process.cwd(), "screenshots");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

export type Theme = "light" | "dark";

export async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}

/** A browser context with the app's theme stored and the OS scheme emulated. */
export async function newContext(browser: Browser, theme: Theme = "light"): Promise<BrowserContext> {
  const context = await browser.newContext({
    baseURL: URL,
    viewport: { width: 1280, height: 800 },
    colorScheme: theme,
  });
  await context.addInitScript((t) => {
    if (!localStorage.getItem("mlxr.theme")) localStorage.setItem("mlxr.theme", JSON.stringify(t));
  }, theme);
  return context;
}

/** Fails the test on any uncaught page error (a blank screen is a failure). */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  return errors;
}

export async function setTheme(page: Page, theme: Theme): Promise<void> {
  await page.evaluate((t) => localStorage.setItem("mlxr.theme", JSON.stringify(t)), theme);
  await page.emulateMedia({ colorScheme: theme });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** POST JSON to the daemon from Node (traffic the UI then shows). */
export async function post(path: string, body: unknown): Promise<unknown> {
  const r = await fetch(URL + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
