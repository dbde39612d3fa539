import { randomBytes } from 'node:crypto'
import { closeSync, createWriteStream, existsSync, fsyncSync, openSync } from 'node:fs'
import { constants, copyFile, link, open, rm, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { Readable, Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { ObjectExistsError, S3BlobStore } from '../../blob/s3-blob-store.js'
import type { S3Config } from '../../config-storage.js'
import { CHUNK_BYTES, sealChunk } from '../../crypto/stream-cipher.js'

/** Where a backup is written or read: a file, or an object of the configured S3 store. */
export type BackupLocation =
  | { kind: 'file'; path: string }
  | { kind: 's3'; bucket: string; key: string }

/** S3 bucket names (config-storage.ts uses the same rule for COFFER_S3_BUCKET). */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/

/** `s3://bucket/key` or a file path; throws a message naming what is wrong. */
export function parseLocation(text: string): BackupLocation {
  if (!text.startsWith('s3://')) {
    if (text.trim() === '' || text.endsWith('/'))
      throw new Error('a backup file must be a file path')
    return { kind: 'file', path: resolve(text) }
  }
  const rest = text.slice('s3://'.length)
  const slash = rest.indexOf('/')
  const bucket = slash < 0 ? rest : rest.slice(0, slash)
  const key = slash < 0 ? '' : rest.slice(slash + 1)
  if (!BUCKET_NAME.test(bucket) || bucket.includes('..')) {
    throw new Error(
      `${text}: s3://<bucket>/<key> needs a bucket name (3 to 63 lowercase letters, digits, dots and hyphens)`,
    )
  }
  if (
    key === '' ||
    key.endsWith('/') ||
    key.split('/').some((s) => s === '' || s === '.' || s === '..')
  ) {
    throw new Error(`${text}: s3://<bucket>/<key> needs an object key (no empty, . or .. part)`)
  }
  return { kind: 's3', bucket, key }
}

export function describeLocation(location: BackupLocation): string {
  return location.kind === 'file' ? location.path : `s3://${location.bucket}/${location.key}`
}

/**
 * A store on the bucket of an s3:// location, with the configured endpoint, credentials and
 * time limits (an s3:// backup needs COFFER_BLOB_STORE=s3's settings).
 */
export function s3StoreFor(s3: S3Config | undefined, bucket: string): S3BlobStore {
  if (!s3) {
    throw new Error(
      's3:// backups use the configured S3 store: set COFFER_BLOB_STORE=s3 and its COFFER_S3_* settings',
    )
  }
  return new S3BlobStore({
    region: s3.region,
    bucket,
    forcePathStyle: s3.forcePathStyle,
    timeouts: {
      connectTimeoutMs: s3.connectTimeoutMs,
      requestTimeoutMs: s3.requestTimeoutMs,
      deadlineMs: s3.deadlineMs,
    },
    ...(s3.endpoint ? { endpoint: s3.endpoint } : {}),
    ...(s3.accessKeyId ? { accessKeyId: s3.accessKeyId } : {}),
    ...(s3.secretAccessKey ? { secretAccessKey: s3.secretAccessKey } : {}),
  })
}

/** The header, then the frames sealed in 64 KiB chunks (backup-format.ts). */
export async function* sealFrames(
  header: Buffer,
  bodyKey: Buffer,
  frames: AsyncIterable<Buffer>,
): AsyncGenerator<Buffer> {
  yield header
  let pending: Buffer[] = []
  let size = 0
  let index = 0
  for await (const piece of frames) {
    pending.push(piece)
    size += piece.length
    if (size <= CHUNK_BYTES) continue
    let all = Buffer.concat(pending)
    // At least one byte stays behind: only the end says which chunk is the last.
    while (all.length > CHUNK_BYTES) {
      yield sealChunk(bodyKey, index++, false, all.subarray(0, CHUNK_BYTES))
      all = all.subarray(CHUNK_BYTES)
    }
    pending = [all]
    size = all.length
  }
  yield sealChunk(bodyKey, index, true, Buffer.concat(pending))
}

/**
 * Writes the backup so that nothing appears under its name unless it is whole: a file is
 * written to a temporary name beside it (mode 0600, fsync), linked to its name (which fails
 * if a file is there: a backup never replaces one) and the folder synced; an S3 object is one
 * PutObject or a multipart upload that is aborted on failure, visible only once complete.
 * Any failure removes what was written. Returns the bytes written.
 */
export async function writeBackup(
  location: BackupLocation,
  body: AsyncIterable<Buffer>,
  s3: S3Config | undefined,
): Promise<{ bytes: number }> {
  let bytes = 0
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length
      done(null, chunk)
    },
  })
  const source = Readable.from(body, { objectMode: false })
  if (location.kind === 's3') {
    const store = s3StoreFor(s3, location.bucket)
    try {
      if (await store.exists(location.key)) {
        throw new Error(`${describeLocation(location)} exists: a backup never replaces another`)
      }
      source.on('error', (e) => counter.destroy(e))
      // Conditional: a backup written meanwhile under the same key is never replaced (the
      // check above only speaks for a store that ignores the condition).
      await store.put(location.key, source.pipe(counter), { ifAbsent: true }).catch((error) => {
        if (error instanceof ObjectExistsError) {
          throw new Error(`${describeLocation(location)} exists: a backup never replaces another`)
        }
        throw error
      })
      return { bytes }
    } finally {
      store.close()
    }
  }
  const target = location.path
  if (existsSync(target)) throw new Error(`${target} exists: a backup never replaces a file`)
  const temp = join(
    dirname(target),
    `.${basename(target)}.${randomBytes(6).toString('hex')}.partial`,
  )
  try {
    await pipeline(
      source,
      counter,
      createWriteStream(temp, { flags: 'wx', mode: 0o600, flush: true }),
    )
    await publish(temp, target)
  } catch (error) {
    await rm(temp, { force: true })
    throw error
  }
  syncFolder(dirname(target))
  return { bytes }
}

/**
 * Links the finished temp file to its name (never over another file), then drops the temp.
 * On a file system without hard links (FAT, some SMB and FUSE mounts) the temp file is copied
 * to a name created exclusively (`COPYFILE_EXCL`: never over another file either) and the copy
 * removed if it fails; there only, a kill during that copy can leave a truncated file under the
 * name, which verify and restore refuse (its last chunk is missing; decisions 244).
 * `linkFile` is the link call (tests give one that fails as such a file system does).
 */
export async function publish(
  temp: string,
  target: string,
  linkFile: (from: string, to: string) => Promise<void> = link,
): Promise<void> {
  const exists = () => new Error(`${target} exists: a backup never replaces a file`)
  try {
    await linkFile(temp, target)
  } catch (error) {
    const code = (error as { code?: unknown }).code
    if (code === 'EEXIST') throw exists()
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') {
      throw error
    }
    try {
      await copyFile(temp, target, constants.COPYFILE_EXCL)
    } catch (copyError) {
      if ((copyError as { code?: unknown }).code === 'EEXIST') throw exists()
      // Ours (the exclusive create succeeded before the copy failed): remove it.
      await rm(target, { force: true })
      throw copyError
    }
  }
  await rm(temp, { force: true })
}

function syncFolder(folder: string): void {
  let fd: number | undefined
  try {
    fd = openSync(folder, 'r')
    fsyncSync(fd)
  } catch {
    // Some platforms refuse fsync on a folder; the link itself is atomic.
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/** The backup's bytes, streamed (a missing file or object is an error naming it). */
export async function openBackup(
  location: BackupLocation,
  s3: S3Config | undefined,
): Promise<{ stream: Readable; close(): void }> {
  if (location.kind === 's3') {
    const store = s3StoreFor(s3, location.bucket)
    try {
      const stream = await store.get(location.key)
      return { stream, close: () => store.close() }
    } catch (error) {
      store.close()
      throw error
    }
  }
  const file = location.path
  if (!(await stat(file).catch(() => undefined))?.isFile())
    throw new Error(`${file}: no such backup file`)
  const handle = await open(file, 'r')
  const stream = handle.createReadStream()
  return { stream, close: () => stream.destroy() }
}
