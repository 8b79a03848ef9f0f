import { fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../../test/fakeStream";
import { SettingsPage } from "./SettingsPage";

const CONFIG = {
  version: "0.1.0",
  listen: { host: "127.0.0.1:11435", socket: null },
  security: { api_key_set: true, origins: [], body_limit: 33554432 },
  models: { keep_alive: "5m", max_loaded_models: 2, max_loaded_memory: null },
  kv_cache: { budget_bytes: 1073741824, dtype: "f16", prefix_caching: true },
};

describe("SettingsPage", () => {
  beforeEach(() => localStorage.clear());
  afterEach(() => vi.unstubAllGlobals());

  it("asks for the key on 401, then shows the configuration with it", async () => {
    const fetch = vi.fn(async (_url: string, init: RequestInit = {}) => {
      const auth = new Headers(init.headers).get("Authorization");
      return auth === "Bearer sekrit"
        ? jsonResponse(CONFIG)
        : jsonResponse({ error: "invalid or missing API key (Authorization: Bearer <key>)" }, 401);
    });
    vi.stubGlobal("fetch", fetch);
    render(<SettingsPage />);
    expect((await screen.findByRole("alert")).textContent).toContain("401");

    fireEvent.change(screen.getByLabelText("API key for this browser"), { target: { value: " sekrit " } });
    const security = await screen.findByRole("region", { name: "Security" });
    expect(localStorage.getItem("mlxr.apiKey")).toBe("sekrit");
    expect(fetch).toHaveBeenLastCalledWith("/api/mlxr/config", expect.anything());
    const text = (name: string) => within(security).getByText(name).nextElementSibling?.textContent;
    expect(text("API key set")).toBe("yes");
    expect(text("Body limit")).toBe("32.0 MiB");
    expect(text("Origins")).toBe("none");
    const kv = screen.getByRole("region", { name: "KV cache" });
    expect(within(kv).getByText("Budget bytes").nextElementSibling?.textContent).toBe("1.0 GiB");
    expect(within(screen.getByRole("region", { name: "Models" })).getByText("Max loaded memory").nextElementSibling?.textContent).toBe("no limit");
    expect(screen.getByText("127.0.0.1:11435")).toBeTruthy();
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("changes the default keep-alive", async () => {
    let keepAlive = "5m";
    const fetch = vi.fn(async (_url: string, init: RequestInit = {}) => {
      if (init.method === "PATCH") {
        const body = JSON.parse(String(init.body)) as { keep_alive: string };
        if (body.keep_alive === "soon") return jsonResponse({ error: "keep_alive: invalid duration 'soon'" }, 400);
        keepAlive = body.keep_alive;
      }
      return jsonResponse({ ...CONFIG, models: { ...CONFIG.models, keep_alive: keepAlive } });
    });
    vi.stubGlobal("fetch", fetch);
    render(<SettingsPage />);
    // Queried afresh each time: a busy host once found the form before a
    // re-render, and a change sent to that copy was lost.
    const parts = () => {
      const form = screen.getByRole("region", { name: "Default keep-alive" });
      const input = within(form).getByRole("textbox", { name: "Keep models loaded after a request for" });
      const save = within(form).getByRole("button", { name: "Save" });
      return { form, input: input as HTMLInputElement, save: save as HTMLButtonElement };
    };
    const submit = async (value: string) => {
      await waitFor(() => {
        const { input, save } = parts();
        if (input.value !== value) fireEvent.change(input, { target: { value } });
        expect(save.disabled).toBe(false);
      });
      fireEvent.click(parts().save);
    };
    await screen.findByRole("region", { name: "Default keep-alive" });
    expect(parts().input.value).toBe("5m");
    expect(parts().save.disabled).toBe(true);

    await submit("soon");
    const slow = { timeout: 5000 };
    expect((await within(parts().form).findByRole("alert", {}, slow)).textContent).toContain("invalid duration");

    await submit("1h");
    expect((await within(parts().form).findByRole("status", {}, slow)).textContent).toBe("Saved: 1h.");
    expect(fetch).toHaveBeenCalledWith("/api/mlxr/config", expect.objectContaining({ method: "PATCH", body: '{"keep_alive":"1h"}' }));
    const models = screen.getByRole("region", { name: "Models" });
    expect(within(models).getByText("Keep alive").nextElementSibling?.textContent).toBe("1h");
  });
});
