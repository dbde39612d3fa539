import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../../src/store/db.js'
import {
  redoclyLint,
  type ServedDocuments,
  servedDocuments,
  tempFolder,
  writeDocuments,
} from '../helpers/openapi-documents.js'
import { openTestStore } from '../helpers/store.js'

/**
 * `npm run lint:openapi` in the suite, so both database legs lint the documents as served:
 * Redocly's recommended rules (redocly.yaml), no error allowed.
 */
const LINT_TIMEOUT_MS = 120_000
let store: Store
let docs: ServedDocuments
const folder = tempFolder()

beforeAll(async () => {
  store = await openTestStore()
  docs = await servedDocuments(store)
})
afterAll(async () => {
  folder.remove()
  await store.close()
})

describe('redocly lint', () => {
  it(
    'passes both served documents (main and consent) with no error',
    async () => {
      const files = writeDocuments(folder.dir, docs)
      const { totals, report } = await redoclyLint(files)
      expect(totals.errors, report).toBe(0)
    },
    LINT_TIMEOUT_MS,
  )

  it(
    'fails a document with an error (the check above can fail)',
    async () => {
      const broken = structuredClone(docs.consent)
      // Two paths that differ only in template names, and an operation without security.
      broken.paths['/x/{a}'] = {
        get: { operationId: 'a', responses: { 200: { description: 'a' } } },
      }
      broken.paths['/x/{b}'] = {
        put: { operationId: 'b', responses: { 200: { description: 'b' } } },
      }
      const file = join(folder.dir, 'broken.json')
      writeFileSync(file, JSON.stringify(broken))
      const { totals, report } = await redoclyLint([file])
      expect(totals.errors).toBeGreaterThan(0)
      expect(report).toMatch(/no-identical-paths/)
      expect(report).toMatch(/security-defined/)
    },
    LINT_TIMEOUT_MS,
  )
})
