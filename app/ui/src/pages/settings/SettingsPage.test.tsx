import { fireEvent, render, screen, within } from "@testing-library/react";
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
});
