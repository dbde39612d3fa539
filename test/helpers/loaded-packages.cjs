// Preloaded (`node --require`) by test/lazy-load-processes.test.ts: when the process exits, writes
// the CommonJS module files it loaded from the packages named in LOADED_PACKAGES (comma-separated)
// to LOADED_PACKAGES_FILE, as a JSON array. An ESM import of a CommonJS package lands in the same
// cache, so a static `import … from '@aws-sdk/client-s3'` anywhere shows here.
const { writeFileSync } = require('node:fs')

process.on('exit', () => {
  const names = (process.env.LOADED_PACKAGES ?? '').split(',').filter(Boolean)
  const loaded = Object.keys(require.cache).filter((file) =>
    names.some((name) => file.includes(`/node_modules/${name}/`)),
  )
  writeFileSync(process.env.LOADED_PACKAGES_FILE ?? '', JSON.stringify(loaded))
})
