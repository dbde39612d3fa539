import { existsSync } from 'node:fs'
import { workerData } from 'node:worker_threads'
import type { ReadOutcome, ReadQuery, ReadWorkerData } from '../../src/store/read-worker.js'
import run from '../../src/store/read-worker.js'

/**
 * The read pool's worker (src/store/read-worker.ts), held while `<database file>.hold` exists:
 * a test makes a search run "for as long as it likes" deterministically, in JavaScript, where a
 * terminate takes effect at once.
 */
const hold = `${(workerData as ReadWorkerData).file}.hold`
const tick = new Int32Array(new SharedArrayBuffer(4))

export default function held(queries: readonly ReadQuery[]): ReadOutcome {
  while (existsSync(hold)) Atomics.wait(tick, 0, 0, 10)
  return run(queries)
}
