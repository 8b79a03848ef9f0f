/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";
import { effectReturns } from "./lint/effectReturns";

// The daemon serves the built app under /ui/ (and at / for browsers).
// `npm run dev` proxies the APIs to `mlxr serve` on its default address.
const daemon = "http://127.0.0.1:11435";

export default defineConfig({
  base: "/ui/",
  plugins: [effectReturns(), react()],
  // One bundle of ~530 kB (166 kB gzipped), most of it react-markdown and
  // highlight.js's common languages; it is served from the local daemon.
  build: { chunkSizeWarningLimit: 600 },
  server: {
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
