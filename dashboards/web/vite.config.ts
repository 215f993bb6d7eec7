// The page is served by agentd from <prefix>/share/bulwark/dashboard under a
// strict Content-Security-Policy: no inline script or style, so the module
// preload polyfill (an inline script) is off and CSS stays in files.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
    reportCompressedSize: false,
  },
});
