// Preloaded (`node --require`) by test/lazy-load-processes.test.ts: when the process exits, writes
// the resident size of V8's young generation (new space, in bytes) to YOUNG_GENERATION_FILE.
const { writeFileSync } = require('node:fs')
const { getHeapSpaceStatistics } = require('node:v8')

process.on('exit', () => {
  const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')
  writeFileSync(process.env.YOUNG_GENERATION_FILE ?? '', String(space?.physical_space_size ?? -1))
})
