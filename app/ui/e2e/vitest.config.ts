import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// End-to-end tests: Node drives Debian's chromium through playwright-core
// against a running `mlxr serve` (scripts/ui-e2e.sh starts it and sets
// MLXR_URL). Run in order, in one process: they share one browser.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL(".", import.meta.url)),
    include: ["**/*.e2e.ts"],
    environment: "node",
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
