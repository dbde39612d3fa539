import { createHash, type Hash } from 'node:crypto'
import type { MasterKeySet } from '../../crypto/master-key-set.js'
import { openChunk, SEALED_CHUNK_BYTES } from '../../crypto/stream-cipher.js'
import {
  BackupError,
  type BackupManifest,
  type BackupMeta,
  ByteReader,
  FRAME_HEAD_BYTES,
  Frame,
  MAX_FRAME_BYTES,
  openBodyKey,
  type ParsedHeader,
  readHeader,
  type TableHeader,
} from './backup-format.js'
import type { Row } from './snapshot.repo.js'

/** What a backup holds, in file order (readBackup). */
export type BackupEvent =
  | { kind: 'meta'; meta: BackupMeta }
  | { kind: 'table'; table: TableHeader }
  | { kind: 'rows'; table: TableHeader; rows: Row[] }
  | { kind: 'table-end'; table: TableHeader; rows: number }
  | { kind: 'object'; key: string }
  | { kind: 'data'; key: string; bytes: Buffer }
  | { kind: 'object-end'; key: string; size: number }
  | { kind: 'secret'; consentSecret: string }
  | { kind: 'manifest'; manifest: BackupManifest }

/**
 * Reads a backup as it streams in: header, key, every chunk authenticated in order (a chunk is
 * handed on only once it opened, the last one only once nothing follows it), every frame in
 * its place, every table's count and hash, every object's size and hash, and the manifest
 * against all of them. Throws BackupError naming the first problem. Events come before the end
 * of the file is authenticated: a caller that must not act on a damaged backup reads it to the
 * end first (the restore does).
 */
export async function* readBackup(
  source: AsyncIterable<Buffer>,
  keys: MasterKeySet,
): AsyncGenerator<BackupEvent> {
  const reader = new ByteReader(source)
  try {
    const header = await readHeader((n) => reader.read(n))
    const key = openBodyKey(header, keys)
    const frames = new ByteReader(plaintext(reader, key, header.bytes.length))
    yield* parseFrames(frames, header)
  } finally {
    await reader.close()
  }
}

async function* plaintext(reader: ByteReader, key: Buffer, start: number): AsyncGenerator<Buffer> {
  let current = await reader.read(SEALED_CHUNK_BYTES)
  for (let index = 0; ; index++) {
    // One chunk of look-ahead: only the end of the file says which chunk is the last.
    const next = await reader.read(SEALED_CHUNK_BYTES)
    const last = next.length === 0
    let plain: Buffer
    try {
      plain = openChunk(key, index, last, current)
    } catch {
      const from = start + index * SEALED_CHUNK_BYTES
      throw new BackupError(
        current.length === 0
          ? `the backup is truncated: its body ends before chunk ${index} (byte ${from})`
          : `the backup fails its integrity check in chunk ${index} (bytes ${from} to ${from + current.length - 1}): it is damaged, truncated or was altered`,
      )
    }
    yield plain
    if (last) return
    current = next
  }
}

function json<T>(payload: Buffer, what: string): T {
  try {
    return JSON.parse(payload.toString('utf8')) as T
  } catch {
    throw new BackupError(`the backup's ${what} is not JSON`)
  }
}

interface OpenTable {
  header: TableHeader
  rows: number
  hash: Hash
}

interface OpenObject {
  key: string
  size: number
  hash: Hash
}

const META_FIELDS: (keyof BackupMeta)[] = [
  'format',
  'backup_id',
  'coffer_version',
  'database',
  'migrations',
  'created_at',
  'master_key',
  'blob_store',
]

async function* parseFrames(frames: ByteReader, header: ParsedHeader): AsyncGenerator<BackupEvent> {
  let meta: BackupMeta | undefined
  let table: OpenTable | undefined
  let object: OpenObject | undefined
  const tables: BackupManifest['tables'] = {}
  const objects = { count: 0, bytes: 0, hash: createHash('sha256') }
  let secret = false
  let manifest: BackupManifest | undefined
  for (;;) {
    const head = await frames.read(FRAME_HEAD_BYTES)
    if (head.length < FRAME_HEAD_BYTES) {
      throw new BackupError('the backup ends before its end marker')
    }
    const kind = head[0] as Frame
    const length = head.readUInt32BE(1)
    if (length > MAX_FRAME_BYTES) throw new BackupError(`a frame of the backup is too large`)
    const payload = await frames.read(length)
    if (payload.length < length) throw new BackupError('the backup ends inside a frame')
    if (!meta && kind !== Frame.Meta)
      throw new BackupError('the backup does not start with its meta')
    if (manifest && kind !== Frame.End)
      throw new BackupError('the backup goes on past its manifest')
    if (object && kind !== Frame.Data && kind !== Frame.ObjectEnd) {
      throw new BackupError(`object ${object.key} of the backup is cut short`)
    }
    switch (kind) {
      case Frame.Meta: {
        if (meta) throw new BackupError('the backup has two metas')
        meta = json<BackupMeta>(payload, 'meta')
        if (meta.master_key !== header.masterKey || meta.backup_id !== header.id) {
          throw new BackupError("the backup's meta does not match its header")
        }
        yield { kind: 'meta', meta }
        break
      }
      case Frame.Table: {
        if (table) throw new BackupError(`table ${table.header.name} of the backup is cut short`)
        const next = json<TableHeader>(payload, 'table header')
        if (!Array.isArray(next.columns) || Object.hasOwn(tables, next.name)) {
          throw new BackupError(`the backup's table header ${next.name} is malformed or repeated`)
        }
        table = { header: next, rows: 0, hash: createHash('sha256') }
        yield { kind: 'table', table: next }
        break
      }
      case Frame.Rows: {
        if (!table) throw new BackupError('the backup has rows outside a table')
        table.hash.update(payload)
        const text = payload.toString('utf8')
        const rows: Row[] = []
        for (const line of text.split('\n')) {
          if (line === '') continue
          const row = json<unknown>(Buffer.from(line), `table ${table.header.name}`)
          if (!Array.isArray(row) || row.length !== table.header.columns.length) {
            throw new BackupError(`a row of table ${table.header.name} does not fit its columns`)
          }
          rows.push(row as Row)
        }
        table.rows += rows.length
        yield { kind: 'rows', table: table.header, rows }
        break
      }
      case Frame.TableEnd: {
        const end = json<{ name: string; rows: number; sha256: string }>(payload, 'table end')
        if (!table || end.name !== table.header.name) {
          throw new BackupError(`the backup ends table ${end.name} it never began`)
        }
        const sha256 = table.hash.digest('hex')
        if (end.rows !== table.rows || end.sha256 !== sha256) {
          throw new BackupError(
            `table ${end.name}: ${table.rows} rows read (SHA-256 ${sha256}), the backup says ${end.rows} (${end.sha256})`,
          )
        }
        tables[end.name] = { rows: end.rows, sha256 }
        yield { kind: 'table-end', table: table.header, rows: end.rows }
        table = undefined
        break
      }
      case Frame.Object: {
        const { key } = json<{ key: string }>(payload, 'object header')
        object = { key, size: 0, hash: createHash('sha256') }
        yield { kind: 'object', key }
        break
      }
      case Frame.Data: {
        if (!object) throw new BackupError('the backup has object bytes outside an object')
        object.size += payload.length
        object.hash.update(payload)
        yield { kind: 'data', key: object.key, bytes: payload }
        break
      }
      case Frame.ObjectEnd: {
        const end = json<{ key: string; size: number; sha256: string }>(payload, 'object end')
        if (!object || end.key !== object.key) {
          throw new BackupError(`the backup ends object ${end.key} it never began`)
        }
        const sha256 = object.hash.digest('hex')
        if (end.size !== object.size || end.sha256 !== sha256) {
          throw new BackupError(`object ${end.key}: its bytes do not match their size and hash`)
        }
        objects.count += 1
        objects.bytes += end.size
        objects.hash.update(`${end.key} ${end.size} ${sha256}\n`)
        yield { kind: 'object-end', key: end.key, size: end.size }
        object = undefined
        break
      }
      case Frame.Secret: {
        if (table || secret) throw new BackupError('the backup has a misplaced secret')
        const { consent_secret } = json<{ consent_secret: string }>(payload, 'secret')
        secret = true
        yield { kind: 'secret', consentSecret: consent_secret }
        break
      }
      case Frame.Manifest: {
        if (table) throw new BackupError(`table ${table.header.name} of the backup is cut short`)
        manifest = json<BackupManifest>(payload, 'manifest')
        checkManifest(manifest, meta as BackupMeta, tables, {
          count: objects.count,
          bytes: objects.bytes,
          sha256: objects.hash.digest('hex'),
          secret,
        })
        yield { kind: 'manifest', manifest }
        break
      }
      case Frame.End: {
        if (!manifest) throw new BackupError('the backup ends without its manifest')
        if (length !== 0 || (await frames.read(1)).length > 0) {
          throw new BackupError('the backup goes on past its end marker')
        }
        return
      }
      default:
        throw new BackupError(`the backup holds a frame of unknown kind ${kind}`)
    }
  }
}

function checkManifest(
  manifest: BackupManifest,
  meta: BackupMeta,
  tables: BackupManifest['tables'],
  objects: { count: number; bytes: number; sha256: string; secret: boolean },
): void {
  for (const field of META_FIELDS) {
    if (JSON.stringify(manifest[field]) !== JSON.stringify(meta[field])) {
      throw new BackupError(`the backup's manifest and meta differ on ${field}`)
    }
  }
  const listed = Object.keys(manifest.tables ?? {}).sort()
  const read = Object.keys(tables).sort()
  if (JSON.stringify(listed) !== JSON.stringify(read)) {
    throw new BackupError(
      `the backup's manifest lists tables ${listed.join(', ')}; the backup holds ${read.join(', ')}`,
    )
  }
  for (const name of read) {
    const want = manifest.tables[name]
    const got = tables[name]
    if (want?.rows !== got?.rows || want?.sha256 !== got?.sha256) {
      throw new BackupError(`table ${name} does not match the backup's manifest`)
    }
  }
  const m = manifest.objects
  if (m?.count !== objects.count || m.bytes !== objects.bytes || m.sha256 !== objects.sha256) {
    throw new BackupError(
      `the backup holds ${objects.count} objects (${objects.bytes} bytes); its manifest says ${m?.count} (${m?.bytes} bytes) or another hash`,
    )
  }
  if (manifest.consent_secret !== objects.secret) {
    throw new BackupError("the backup's manifest and content differ on the consent secret")
  }
}
