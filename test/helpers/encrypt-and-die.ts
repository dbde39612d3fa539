import { loadConfig } from '../../src/config.js'
import { prepareSqliteFile } from '../../src/modules/keys/file-key.js'

/**
 * `coffer`'s start-up preparation of the SQLite file (modules/keys/file-key.ts), run as its own
 * process that kills itself (SIGKILL: no handler, no cleanup) right after the step named by its
 * first argument — what a power cut or an OOM kill at that moment does.
 */
const step = process.argv[2]
await prepareSqliteFile(loadConfig(), {
  onStep: (s) => {
    if (s === step) process.kill(process.pid, 'SIGKILL')
  },
})
process.stdout.write('finished without being killed\n')
