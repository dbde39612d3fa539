import { fileURLToPath } from 'node:url'
import preact from '@preact/preset-vite'
import { defineConfig } from 'vite'

/**
 * The console's build: served by Coffer under /console (src/modules/console), so every URL is
 * absolute below it, file names carry their content hash (cached for ever), and nothing is
 * inlined into index.html (the page's CSP allows no inline script or style).
 */
export default defineConfig(({ command }) => {
  // The build is always the production one, whatever NODE_ENV the shell (or Vitest, which sets
  // `test`) passes down: Vite decides after reading this file, and anything else makes a
  // development build that names each element's source file by its absolute path.
  if (command === 'build') process.env.NODE_ENV = 'production'
  return {
    root: fileURLToPath(new URL('.', import.meta.url)),
    base: '/console/',
    plugins: [preact({ prefreshEnabled: false, devToolsEnabled: false })],
    build: {
      outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
      emptyOutDir: true,
      // Vite's preload polyfill and small-asset inlining would put code or data in the page.
      modulePreload: { polyfill: false },
      assetsInlineLimit: 0,
      cssCodeSplit: false,
      sourcemap: false,
      reportCompressedSize: false,
    },
    logLevel: 'warn',
  }
})
