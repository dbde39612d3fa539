import { createHash, hkdfSync, randomBytes } from 'node:crypto'
import { KEY_BYTES } from '../../crypto/aead.js'
import type { MasterKey } from '../../crypto/master-key.js'
import type { MasterKeySet } from '../../crypto/master-key-set.js'
import { newId } from '../../lib/ids.js'

/**
 * The backup file (decisions 233): a small plaintext header, then one body encrypted and
 * authenticated as a whole.
 *
 *   header  "COFFERBK" | version (1 byte) | JSON length (2 bytes, big-endian) | JSON | SHA-256
 *           JSON: {"id", "master_key": fingerprint, "wrapped_key": base64}; the SHA-256 covers
 *           everything before it (a damaged header is named as such)
 *   body    the STREAM construction of crypto/stream-cipher.ts (64 KiB AES-256-GCM chunks, the
 *           chunk's index and a last-chunk flag in its nonce: reordering, dropping and truncation
 *           fail) under a body key derived (HKDF-SHA-256) from a random backup key and the
 *           header's hash, so a change anywhere in the header fails the first chunk too. The
 *           backup key is wrapped by the master key whose fingerprint the header names.
 *
 * The body's plaintext is a sequence of frames: kind (1 byte) | length (4 bytes) | payload.
 */
export const MAGIC = Buffer.from('COFFERBK', 'ascii')
export const FORMAT_VERSION = 1
/** Magic, version and the JSON's length. */
export const HEADER_START_BYTES = MAGIC.length + 3
export const HEADER_JSON_MAX_BYTES = 4096
const CHECKSUM_BYTES = 32
/** Largest frame a reader accepts (a page of rows, one row at most this large). */
export const MAX_FRAME_BYTES = 256 * 1024 * 1024
export const FRAME_HEAD_BYTES = 5

export enum Frame {
  /** JSON BackupMeta: first. */
  Meta = 1,
  /** JSON TableHeader: a table's rows follow. */
  Table = 2,
  /** JSON lines, one JSON array (a row, in the table's column order) per line. */
  Rows = 3,
  /** JSON {name, rows, sha256}: the table's count and the SHA-256 of its Rows payloads. */
  TableEnd = 4,
  /** JSON {key}: a BLOB object's stored (encrypted) bytes follow. */
  Object = 5,
  /** Raw bytes of the current object (at most 64 KiB). */
  Data = 6,
  /** JSON {key, size, sha256}. */
  ObjectEnd = 7,
  /** JSON {consent_secret}: the generated consent secret file's content. */
  Secret = 8,
  /** JSON BackupManifest: last but the end. */
  Manifest = 9,
  /** Empty: nothing may follow. */
  End = 10,
}

/** A backup that cannot be read: the message names the first problem found. */
export class BackupError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'BackupError'
  }
}

/** What a backup is of, known before its first row. */
export interface BackupMeta {
  format: number
  backup_id: string
  coffer_version: string
  database: 'sqlite' | 'postgres'
  /** The migrations applied to the database (its schema version is the last). */
  migrations: string[]
  /** When the snapshot was taken (the read transaction's start). */
  created_at: string
  /** The fingerprint of the master key that wraps the backup key. */
  master_key: string
  /** The BLOB store the objects were read from. */
  blob_store: 'fs' | 's3'
}

export interface TableHeader {
  name: string
  columns: string[]
  primary_key: string[]
}

/** The trailer: the meta again, then counts and hashes of every part. */
export interface BackupManifest extends BackupMeta {
  finished_at: string
  tables: Record<string, { rows: number; sha256: string }>
  /** Every BLOB object: count, bytes, and the SHA-256 of the `key size sha256` lines. */
  objects: { count: number; bytes: number; sha256: string }
  /**
   * BLOBs whose object was deleted or replaced after the snapshot and before it was copied:
   * deleted ones are left out, replaced ones carry their newer content (decisions 234).
   */
  blobs_changed_during_backup: { deleted: number; replaced: number }
  consent_secret: boolean
}

export function sha256(data: Buffer | string): Buffer {
  return createHash('sha256').update(data).digest()
}

function keyContext(id: string): string {
  return `backup\n${id}`
}

function bodyKey(backupKey: Buffer, header: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', backupKey, sha256(header), 'coffer backup body v1', 32))
}

/** A new header: a random backup key wrapped by `master`, and the body key it yields. */
export function newHeader(master: MasterKey): { header: Buffer; bodyKey: Buffer; id: string } {
  const id = newId()
  const key = randomBytes(KEY_BYTES)
  const json = Buffer.from(
    JSON.stringify({ id, master_key: master.id, wrapped_key: master.wrap(key, keyContext(id)) }),
  )
  const start = Buffer.alloc(HEADER_START_BYTES)
  MAGIC.copy(start)
  start[MAGIC.length] = FORMAT_VERSION
  start.writeUInt16BE(json.length, MAGIC.length + 1)
  const head = Buffer.concat([start, json])
  const header = Buffer.concat([head, sha256(head)])
  return { header, bodyKey: bodyKey(key, header), id }
}

export interface ParsedHeader {
  id: string
  /** Fingerprint of the master key the backup needs. */
  masterKey: string
  wrappedKey: string
  /** The header's bytes, as read. */
  bytes: Buffer
}

/** Reads the header from `read` (n bytes, fewer only at the end of the file). */
export async function readHeader(read: (n: number) => Promise<Buffer>): Promise<ParsedHeader> {
  const start = await read(HEADER_START_BYTES)
  if (start.length >= MAGIC.length && !start.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new BackupError('not a Coffer backup file (its first bytes are not COFFERBK)')
  }
  if (start.length < HEADER_START_BYTES) throw new BackupError('the backup is truncated (header)')
  const version = start[MAGIC.length] as number
  const length = start.readUInt16BE(MAGIC.length + 1)
  if (length > HEADER_JSON_MAX_BYTES) {
    throw new BackupError('the backup header is damaged (its length is out of range)')
  }
  const json = await read(length)
  const checksum = await read(CHECKSUM_BYTES)
  if (json.length < length || checksum.length < CHECKSUM_BYTES) {
    throw new BackupError('the backup is truncated (header)')
  }
  const head = Buffer.concat([start, json])
  if (!sha256(head).equals(checksum)) {
    throw new BackupError('the backup header is damaged (its checksum does not match)')
  }
  if (version !== FORMAT_VERSION) {
    throw new BackupError(
      `backup format version ${version} is not one this Coffer reads (${FORMAT_VERSION})`,
    )
  }
  let parsed: { id?: unknown; master_key?: unknown; wrapped_key?: unknown }
  try {
    parsed = JSON.parse(json.toString('utf8'))
  } catch {
    throw new BackupError('the backup header is damaged (not JSON)')
  }
  const { id, master_key, wrapped_key } = parsed
  if (typeof id !== 'string' || typeof master_key !== 'string' || typeof wrapped_key !== 'string')
    throw new BackupError('the backup header is damaged (fields missing)')
  return {
    id,
    masterKey: master_key,
    wrappedKey: wrapped_key,
    bytes: Buffer.concat([head, checksum]),
  }
}

/** The body key, unwrapped by the master key the header names, or a BackupError saying which. */
export function openBodyKey(header: ParsedHeader, keys: MasterKeySet): Buffer {
  const master = keys.all().find((k) => k.id === header.masterKey)
  if (!master) {
    throw new BackupError(
      `this backup needs master key ${header.masterKey}; the keys held are ${keys.fingerprints().join(', ')} (COFFER_MASTER_KEY, COFFER_MASTER_KEY_PREVIOUS, the key files)`,
    )
  }
  let key: Buffer
  try {
    key = master.unwrap(header.wrappedKey, keyContext(header.id))
  } catch {
    // IntegrityError: the wrapped key, the id or the fingerprint were changed.
    throw new BackupError(
      `the backup key does not open with master key ${header.masterKey}: the header was altered`,
    )
  }
  return bodyKey(key, header.bytes)
}

/** One frame's bytes. */
export function frame(kind: Frame, payload: Buffer | string = Buffer.alloc(0)): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload
  if (body.length > MAX_FRAME_BYTES) {
    throw new Error(`a backup frame may hold at most ${MAX_FRAME_BYTES} bytes (${body.length})`)
  }
  const head = Buffer.alloc(FRAME_HEAD_BYTES)
  head[0] = kind
  head.writeUInt32BE(body.length, 1)
  return Buffer.concat([head, body])
}

export function jsonFrame(kind: Frame, value: unknown): Buffer {
  return frame(kind, JSON.stringify(value))
}

/**
 * Hands out exactly the bytes asked for from a stream of buffers (fewer only at its end),
 * holding no more than one read's worth beyond what the source gave.
 */
export class ByteReader {
  readonly #source: AsyncIterator<Buffer>
  #pending: Buffer[] = []
  #length = 0
  #ended = false
  /** Bytes handed out so far. */
  offset = 0

  constructor(source: AsyncIterable<Buffer>) {
    this.#source = source[Symbol.asyncIterator]()
  }

  async read(n: number): Promise<Buffer> {
    while (this.#length < n && !this.#ended) {
      const next = await this.#source.next()
      if (next.done) {
        this.#ended = true
        break
      }
      const chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value)
      if (chunk.length === 0) continue
      this.#pending.push(chunk)
      this.#length += chunk.length
    }
    const all =
      this.#pending.length === 1 ? (this.#pending[0] as Buffer) : Buffer.concat(this.#pending)
    const out = all.subarray(0, Math.min(n, all.length))
    const rest = all.subarray(out.length)
    this.#pending = rest.length > 0 ? [rest] : []
    this.#length = rest.length
    this.offset += out.length
    return out
  }

  /** Stops the source (a reader that gave up early). */
  async close(): Promise<void> {
    await this.#source.return?.()
  }
}
