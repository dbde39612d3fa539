import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Readable } from 'node:stream'
import { BlobNotFoundError, type BlobStore } from '../../blob/blob-store.js'
import { CHUNK_BYTES } from '../../crypto/stream-cipher.js'
import type { DialectName } from '../../store/db.js'
import type { Executor } from '../../store/executor.js'
import {
  type BackupManifest,
  type BackupMeta,
  FORMAT_VERSION,
  Frame,
  frame,
  jsonFrame,
  type TableHeader,
} from './backup-format.js'
import {
  appliedMigrations,
  countRows,
  currentRow,
  listTables,
  pageRows,
  type Row,
  type TableInfo,
} from './snapshot.repo.js'

/** The table whose rows name BLOB objects, and what a content replacement changes in a row. */
export const OBJECT_TABLE = {
  name: 'blobs',
  keyColumn: 'object_key',
  contentColumns: ['object_key', 'content_key', 'size', 'mime_type', 'filename', 'updated_at'],
} as const

/** How a table is read: page sizes in rows, and how large a page is in memory. */
interface Paging {
  /** Rows read per page at first; the page then follows `targetBytes`. */
  firstRows: number
  maxRows: number
  /** A page of rows is about this large in memory (rows are read page by page). */
  targetBytes: number
  /** Give the event loop a turn between pages. */
  yieldBetween: boolean
}

/** PostgreSQL: the driver reads off the event loop, so pages can be large. */
const LARGE_PAGES: Paging = {
  firstRows: 500,
  maxRows: 2000,
  targetBytes: 4 * 1024 * 1024,
  yieldBetween: false,
}

/**
 * SQLite: each page is a synchronous read on the event loop of the serving process (a scheduled
 * backup), so pages are small (about 256 KiB, a few ms) and requests run between them
 * (decisions 246).
 */
export const SQLITE_PAGES: Paging = {
  firstRows: 10,
  maxRows: 250,
  targetBytes: 256 * 1024,
  yieldBetween: true,
}

const pagingOf = (dialect: DialectName): Paging =>
  dialect === 'sqlite' ? SQLITE_PAGES : LARGE_PAGES
/** A Rows frame is cut once it passes this. */
const ROWS_FRAME_BYTES = 1024 * 1024
/** Attempts to find a BLOB's current object when its own was replaced meanwhile. */
const OBJECT_ATTEMPTS = 3

/** This release (package.json), recorded in every backup. */
export const CODE_VERSION: string = JSON.parse(
  readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'),
).version

export interface SnapshotInput {
  dialect: DialectName
  /** Inside the snapshot's read transaction (snapshot.repo.ts inSnapshot). */
  snapshot: Executor
  /** Outside it: how a BLOB whose object is gone looks now. */
  live: Executor
  blobStore: BlobStore
  backupId: string
  /** Fingerprint of the master key the backup key is wrapped by. */
  masterKeyId: string
  /** The generated consent secret file's content, when there is one. */
  consentSecret?: string
  onProgress?: (done: number, total: number) => void
  signal?: AbortSignal
  now?: () => Date
}

/**
 * The backup's frames, from one snapshot: meta, the consent secret, every table page by page
 * (parents before children), each BLOB row followed by its object's stored bytes, the manifest.
 * `result.manifest` is set once the generator is done.
 */
export function snapshotFrames(input: SnapshotInput): {
  frames: AsyncGenerator<Buffer>
  result: { manifest?: BackupManifest }
} {
  const result: { manifest?: BackupManifest } = {}
  return { frames: generate(input, result), result }
}

async function* generate(
  input: SnapshotInput,
  result: { manifest?: BackupManifest },
): AsyncGenerator<Buffer> {
  const now = input.now ?? (() => new Date())
  const { snapshot, signal } = input
  // The first statement takes the snapshot: everything committed before it is in the backup.
  const migrations = await appliedMigrations(snapshot)
  const createdAt = now().toISOString()
  const tables = await listTables(snapshot, input.dialect)
  const counts = new Map<string, number>()
  for (const t of tables) counts.set(t.name, await countRows(snapshot, t.name))
  const objectsTotal = counts.get(OBJECT_TABLE.name) ?? 0
  const total = [...counts.values()].reduce((a, b) => a + b, 0) + objectsTotal
  let done = 0
  const progress = (n = 1) => {
    done += n
    input.onProgress?.(done, total)
  }
  input.onProgress?.(0, total)
  const meta: BackupMeta = {
    format: FORMAT_VERSION,
    backup_id: input.backupId,
    coffer_version: CODE_VERSION,
    database: input.dialect,
    migrations,
    created_at: createdAt,
    master_key: input.masterKeyId,
    blob_store: input.blobStore.kind === 's3' ? 's3' : 'fs',
  }
  yield jsonFrame(Frame.Meta, meta)
  if (input.consentSecret !== undefined) {
    yield jsonFrame(Frame.Secret, { consent_secret: input.consentSecret })
  }
  const manifestTables: BackupManifest['tables'] = {}
  const objects = { count: 0, bytes: 0, hash: createHash('sha256') }
  const changed = { deleted: 0, replaced: 0 }
  for (const table of tables) {
    const header: TableHeader = {
      name: table.name,
      columns: table.columns,
      primary_key: table.primaryKey,
    }
    yield jsonFrame(Frame.Table, header)
    const hash = createHash('sha256')
    let rows = 0
    const withObjects = table.name === OBJECT_TABLE.name
    for await (const page of pages(snapshot, table, signal, pagingOf(input.dialect))) {
      if (!withObjects) {
        for (const payload of rowsPayloads(page)) {
          hash.update(payload)
          yield frame(Frame.Rows, payload)
        }
        rows += page.length
        progress(page.length)
        continue
      }
      for (const snapshotRow of page) {
        const found = await objectOf(input, table, snapshotRow)
        if (found.change) changed[found.change] += 1
        if (found.change === 'deleted') {
          progress(2)
          continue
        }
        const payload = Buffer.from(`${JSON.stringify(found.row)}\n`)
        hash.update(payload)
        let copied: { size: number; sha256: string }
        try {
          yield frame(Frame.Rows, payload)
          rows += 1
          progress()
          copied = yield* objectFrames(found.key, found.content, signal)
        } finally {
          found.content.destroy()
        }
        objects.count += 1
        objects.bytes += copied.size
        objects.hash.update(`${found.key} ${copied.size} ${copied.sha256}\n`)
        progress()
      }
    }
    const expected = counts.get(table.name) ?? 0
    const left = withObjects ? changed.deleted : 0
    if (rows + left !== expected) {
      throw new Error(`table ${table.name}: ${rows} rows read of ${expected} in the snapshot`)
    }
    const sha256 = hash.digest('hex')
    manifestTables[table.name] = { rows, sha256 }
    yield jsonFrame(Frame.TableEnd, { name: table.name, rows, sha256 })
  }
  const manifest: BackupManifest = {
    ...meta,
    finished_at: now().toISOString(),
    tables: manifestTables,
    objects: { count: objects.count, bytes: objects.bytes, sha256: objects.hash.digest('hex') },
    blobs_changed_during_backup: changed,
    consent_secret: input.consentSecret !== undefined,
  }
  yield jsonFrame(Frame.Manifest, manifest)
  yield frame(Frame.End)
  result.manifest = manifest
}

/**
 * The table's rows in primary-key order, a page at a time; the page size follows the rows'
 * size, so a table of large documents holds about `targetBytes` in memory, not a fixed count.
 */
async function* pages(
  db: Executor,
  table: TableInfo,
  signal: AbortSignal | undefined,
  paging: Paging = LARGE_PAGES,
): AsyncGenerator<Row[]> {
  let size = paging.firstRows
  let after: Row | undefined
  const keyAt = table.primaryKey.map((c) => table.columns.indexOf(c))
  for (let first = true; ; first = false) {
    if (paging.yieldBetween && !first) await new Promise((resolve) => setImmediate(resolve))
    signal?.throwIfAborted()
    const page = await pageRows(db, table, after, size)
    if (page.length === 0) return
    yield page
    if (page.length < size) return
    const last = page[page.length - 1] as Row
    after = keyAt.map((i) => last[i] ?? null)
    const bytes = page.reduce((sum, row) => sum + approximateBytes(row), 0)
    const perRow = Math.max(1, bytes / page.length)
    size = Math.max(1, Math.min(paging.maxRows, Math.floor(paging.targetBytes / perRow)))
  }
}

function approximateBytes(row: Row): number {
  let n = 16
  for (const c of row) n += typeof c === 'string' ? c.length * 2 : 8
  return n
}

/** JSON lines, cut into payloads of about ROWS_FRAME_BYTES. */
function* rowsPayloads(rows: Row[]): Generator<Buffer> {
  let lines: string[] = []
  let size = 0
  for (const row of rows) {
    const line = `${JSON.stringify(row)}\n`
    lines.push(line)
    size += line.length
    if (size >= ROWS_FRAME_BYTES) {
      yield Buffer.from(lines.join(''))
      lines = []
      size = 0
    }
  }
  if (lines.length > 0) yield Buffer.from(lines.join(''))
}

/** The object's stored bytes as frames; returns their size and SHA-256. */
async function* objectFrames(
  key: string,
  content: Readable,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer, { size: number; sha256: string }> {
  yield jsonFrame(Frame.Object, { key })
  const hash = createHash('sha256')
  let size = 0
  try {
    for await (const chunk of content as AsyncIterable<Buffer>) {
      signal?.throwIfAborted()
      for (let at = 0; at < chunk.length; at += CHUNK_BYTES) {
        const piece = chunk.subarray(at, at + CHUNK_BYTES)
        hash.update(piece)
        size += piece.length
        yield frame(Frame.Data, piece)
      }
    }
  } finally {
    content.destroy()
  }
  const sha256 = hash.digest('hex')
  yield jsonFrame(Frame.ObjectEnd, { key, size, sha256 })
  return { size, sha256 }
}

/** The row to back up and its object, or `deleted`: the BLOB was deleted after the snapshot. */
type FoundObject =
  | { row: Row; key: string; content: Readable; change?: 'replaced' }
  | { row?: undefined; change: 'deleted' }

/**
 * Opens the object a BLOB row names. Objects never change, but a BLOB deleted or given new
 * content after the snapshot has its object deleted: then the row as it is now decides
 * (decisions 234). Gone: the BLOB is left out, as if deleted before the backup. New content:
 * the snapshot's row with the new content's columns, and the new object. The same object
 * missing now: the store lost it, and the backup fails naming it.
 */
async function objectOf(
  input: SnapshotInput,
  table: TableInfo,
  snapshotRow: Row,
): Promise<FoundObject> {
  const at = (column: string) => table.columns.indexOf(column)
  const keyAt = at(OBJECT_TABLE.keyColumn)
  let row = snapshotRow
  let change: 'replaced' | undefined
  for (let attempt = 1; ; attempt++) {
    const key = String(row[keyAt])
    try {
      const content = await input.blobStore.get(key)
      return { row, key, content, ...(change ? { change } : {}) }
    } catch (error) {
      if (!(error instanceof BlobNotFoundError)) throw error
    }
    const primaryKey = table.primaryKey.map((c) => snapshotRow[at(c)] ?? null)
    const now = await currentRow(input.live, table, primaryKey)
    if (!now) return { change: 'deleted' }
    if (String(now[keyAt]) === key || attempt >= OBJECT_ATTEMPTS) {
      const name = Object.fromEntries(table.primaryKey.map((c) => [c, snapshotRow[at(c)]]))
      throw new Error(
        `BLOB ${JSON.stringify(name)} names object ${key}, which the BLOB store does not have: run \`coffer check\`, then restore the object or delete the BLOB`,
      )
    }
    const merged = [...snapshotRow]
    for (const column of OBJECT_TABLE.contentColumns) {
      const i = at(column)
      if (i >= 0) merged[i] = now[i] ?? null
    }
    row = merged
    change = 'replaced'
  }
}

/** A table's row count and SHA-256 exactly as a backup hashes it (verify reads a restore back). */
export async function digestTable(
  db: Executor,
  table: TableInfo,
): Promise<{ rows: number; sha256: string }> {
  const hash = createHash('sha256')
  let rows = 0
  for await (const page of pages(db, table, undefined)) {
    for (const payload of rowsPayloads(page)) hash.update(payload)
    rows += page.length
  }
  return { rows, sha256: hash.digest('hex') }
}
