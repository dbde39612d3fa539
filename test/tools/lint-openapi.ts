/**
 * `npm run lint:openapi` (CI, after the typecheck): builds both apps on an in-memory SQLite
 * store, writes the documents they serve to a temp folder and lints them with Redocly
 * (redocly.yaml). Exits non-zero on any lint error.
 */
import { openStore } from '../../src/store/db.js'
import { migrateToLatest } from '../../src/store/migrate.js'
import {
  redoclyLint,
  servedDocuments,
  tempFolder,
  writeDocuments,
} from '../helpers/openapi-documents.js'

const store = openStore({ url: ':memory:' })
await migrateToLatest(store.db)
const folder = tempFolder()
try {
  const files = writeDocuments(folder.dir, await servedDocuments(store))
  const { totals, report } = await redoclyLint(files)
  console.log(report)
  console.log(
    `OpenAPI lint: ${totals.errors} errors, ${totals.warnings} warnings (${files.join(', ')})`,
  )
  process.exitCode = totals.errors > 0 ? 1 : 0
} finally {
  folder.remove()
  await store.close()
}
