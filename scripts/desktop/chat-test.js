// Run in mlxr-desktop's page by its test hook (scripts/desktop-tests.sh,
// which defines window.__mlxrTest first: pullSource, goDigest,
// uploadBytes): sends a chat message through the real UI and checks that
// the reply came through the app's socket bridge in pieces, the first well
// before the end; then pulls a local GGUF through the bridge (the app
// notifies when it succeeds); then, once the script has stored the blob
// goDigest (its go-ahead, after it noted the app's memory), uploads a file
// of uploadBytes random bytes as the SDK's pushBlob does (XMLHttpRequest
// with upload progress) to POST /api/blobs/DIGEST, and aborts another
// upload midway. Reports "CHAT ...", "PULL ...", "UPLOAD waiting",
// "UPLOAD ...", "ABORT ...", then "PASS" or "FAIL ..." (see
// app/desktop/src/test_hook.rs).
(async () => {
  const report = (line) => window.ipc.postMessage(JSON.stringify({ op: "report", line }));
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const waitFor = async (what, fn, ms = 180000) => {
    const t0 = Date.now();
    while (Date.now() - t0 < ms) {
      const v = await fn();
      if (v) return v;
      await sleep(100);
    }
    throw new Error(`timed out after ${ms} ms waiting for ${what}`);
  };
  const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const hasBlob = async (digest) => (await fetch(`/api/blobs/sha256:${digest}`, { method: "HEAD" })).status === 200;
  // A file of `size` random bytes, and its SHA-256 (WebCrypto's, computed
  // before anything is sent).
  const randomFile = async (size, name) => {
    const bytes = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(bytes.subarray(i, i + 65536));
    return { file: new File([bytes], name), digest: hex(await crypto.subtle.digest("SHA-256", bytes)) };
  };
  // POST /api/blobs/sha256:DIGEST as the SDK's pushBlob does in a browser;
  // `onProgress` may return true to abort.
  const pushBlob = (digest, file, onProgress) =>
    new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", `/api/blobs/sha256:${digest}`);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      xhr.upload.onprogress = (e) => {
        if (onProgress(e.loaded, e.lengthComputable ? e.total : file.size)) xhr.abort();
      };
      xhr.onload = () => resolve({ status: xhr.status, text: xhr.responseText });
      xhr.onerror = () => reject(new Error("the upload failed (connection lost?)"));
      xhr.onabort = () => resolve({ aborted: true });
      xhr.send(file);
    });
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

    const size = window.__mlxrTest.uploadBytes;
    const big = await randomFile(size, "big.gguf");
    report("UPLOAD waiting");
    await waitFor("the script's go-ahead", () => hasBlob(window.__mlxrTest.goDigest), 120000);
    const progress = [];
    const t0 = performance.now();
    const sent = await pushBlob(big.digest, big.file, (loaded, total) => {
      progress.push([loaded, total]);
    });
    const ms = performance.now() - t0;
    if (sent.status !== 201) throw new Error(`the upload: ${sent.status} ${sent.text}`);
    const loaded = progress.map(([l]) => l);
    if (progress.length < 2 || loaded.some((l, i) => i > 0 && l <= loaded[i - 1]) || loaded[loaded.length - 1] !== size
        || progress.some(([, t]) => t !== size)) {
      throw new Error(`upload progress: ${JSON.stringify(progress)}`);
    }
    if (!(await hasBlob(big.digest))) throw new Error(`the daemon has no blob sha256:${big.digest} after the upload`);
    report(`UPLOAD ${size} bytes sha256:${big.digest} status=${sent.status} progress=${progress.length} events in ${ms.toFixed(0)}ms`);

    const other = await randomFile(64 << 20, "cut.gguf");
    let cutAt = 0;
    const cut = await pushBlob(other.digest, other.file, (l) => {
      cutAt = l;
      return l >= 8 << 20;
    });
    if (!cut.aborted) throw new Error(`the upload to abort ended: ${JSON.stringify(cut)}`);
    if (await hasBlob(other.digest)) throw new Error("an aborted upload was stored");
    report(`ABORT after ${cutAt} of ${other.file.size} bytes sha256:${other.digest}`);
    report("PASS");
  } catch (e) {
    report(`FAIL ${e && e.stack ? e.stack : e}`);
  }
})();
