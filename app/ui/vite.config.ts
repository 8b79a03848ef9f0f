/// <reference types="vitest/config" />
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";
import { effectReturns } from "./lint/effectReturns";

// The daemon serves the built app under /ui/ (and at / for browsers).
// `npm run dev` proxies the APIs to `mlxr serve` on its default address.
const daemon = "http://127.0.0.1:11435";

// The TypeScript SDK (sdks/typescript) built from its sources with the app,
// so the NDJSON and SSE parsers exist once; tsconfig.json's `paths` says the
// same to tsc, and crates/mlxr-server/build.rs counts it among the inputs.
const sdk = fileURLToPath(new URL("../../sdks/typescript/src", import.meta.url));

export default defineConfig({
  base: "/ui/",
  plugins: [effectReturns(), react()],
  resolve: { alias: { mlxr: `${sdk}/index.ts` } },
  // One bundle of ~530 kB (166 kB gzipped), most of it react-markdown and
  // highlight.js's common languages; it is served from the local daemon.
  build: { chunkSizeWarningLimit: 600 },
  server: {
    // The dev server serves only the app's folder unless told otherwise.
    fs: { allow: [".", sdk] },
    proxy: {
      "/api": daemon,
      "/v1": daemon,
      "/metrics": daemon,
    },
  },
  test: {
    environment: "jsdom",
    globals: true,
  },
});
