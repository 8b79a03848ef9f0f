// Run in mlxr-desktop's page by its test hook (scripts/desktop-tests.sh,
// which defines window.__mlxrTest.pullSource first): sends a chat message
// through the real UI and checks that the reply came through the app's
// socket bridge in pieces, the first well before the end; then pulls a
// local GGUF through the bridge (the app notifies when it succeeds).
// Reports "CHAT ...", "PULL ...", then "PASS" or "FAIL ..." (see
// app/desktop/src/test_hook.rs).
(async () => {
  const report = (line) => window.ipc.postMessage(JSON.stringify({ op: "report", line }));
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const waitFor = async (what, fn, ms = 180000) => {
    const t0 = Date.now();
    while (Date.now() - t0 < ms) {
      const v = fn();
      if (v) return v;
      await sleep(100);
    }
    throw new Error(`timed out after ${ms} ms waiting for ${what}`);
  };
  try {
    if (!window.__mlxrBridge) throw new Error("the fetch shim is not installed");
    const input = await waitFor("the chat input", () => document.querySelector("#chat-input"));
    await waitFor("smollm2 in the model list", () =>
      [...document.querySelectorAll("select option")].some((o) => o.value.startsWith("smollm2")),
    );
    report("ui ready");
    const setValue = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set;
    setValue.call(input, "Write one sentence about the sea.");
    input.dispatchEvent(new Event("input", { bubbles: true }));
    const send = await waitFor("an enabled Send button", () =>
      [...document.querySelectorAll("form.composer button")].find((b) => b.textContent.trim() === "Send" && !b.disabled),
    );
    send.click();
    const stats = await waitFor("the reply's statistics", () => {
      const replies = document.querySelectorAll('article[aria-label="Assistant"]');
      const last = replies[replies.length - 1];
      return last && last.querySelector('[aria-label="Reply statistics"]') && last;
    });
    const text = stats.innerText.replace(/\s+/g, " ").trim();
    const chat = window.__mlxrBridge.log.filter((e) => e.path === "/api/chat");
    if (chat.length !== 1) throw new Error(`expected one /api/chat request through the bridge, saw ${chat.length}`);
    const c = chat[0];
    if (c.status !== 200 || c.end === undefined) throw new Error(`/api/chat: status ${c.status}, end ${c.end}, error ${c.error}`);
    const first = c.chunks[0] - c.start;
    const end = c.end - c.start;
    const line = `chunks=${c.chunks.length} first=${first.toFixed(0)}ms end=${end.toFixed(0)}ms reply="${text.slice(0, 160)}"`;
    // Streamed: many pieces, and the first long before the last.
    if (c.chunks.length < 5 || end - first < 100) throw new Error(`not streamed: ${line}`);
    // The UI is done with the reply: the composer offers Send again.
    await waitFor("the Send button back", () =>
      [...document.querySelectorAll("form.composer button")].some((b) => b.textContent.trim() === "Send"),
      20000,
    ).catch((e) => {
      const summary = window.__mlxrBridge.log.map((x) => `${x.method} ${x.path} ${x.status} end=${x.end !== undefined} err=${x.error}`);
      throw new Error(`${e.message}; bridge log: ${summary.join(" | ")}`);
    });
    report(`CHAT ${line}`);
    const pull = await fetch("/api/pull", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: window.__mlxrTest.pullSource }),
    });
    const lines = (await pull.text()).trim().split("\n");
    const last = JSON.parse(lines[lines.length - 1]);
    if (pull.status !== 200 || last.status !== "success") {
      throw new Error(`the pull: ${pull.status} ${lines.slice(-3).join(" ")}`);
    }
    report(`PULL ${lines.length} progress lines, then ${last.status}`);
    report("PASS");
  } catch (e) {
    report(`FAIL ${e && e.stack ? e.stack : e}`);
  }
})();
