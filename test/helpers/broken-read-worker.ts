import { existsSync } from 'node:fs'
import { workerData } from 'node:worker_threads'
import type { ReadWorkerData } from '../../src/store/read-worker.js'

/**
 * The read pool's worker (src/store/read-worker.ts), unable to start while
 * `<database file>.broken` exists: a worker module that throws as it loads, as a broken
 * installation or an unreadable file would.
 */
if (existsSync(`${(workerData as ReadWorkerData).file}.broken`))
  throw new Error('this read worker cannot start (test)')

export { default } from '../../src/store/read-worker.js'
