import { randomBytes } from 'node:crypto'
import { createWriteStream, type Dirent } from 'node:fs'
import { access, constants, mkdir, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises'
import path from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { BlobNotFoundError, type BlobStore, type StoredObject } from './blob-store.js'

/** A key that is not a plain relative path made of `/`-separated names. */
export class InvalidBlobKeyError extends Error {
  constructor(key: string) {
    super(`invalid blob key: ${JSON.stringify(key)}`)
    this.name = 'InvalidBlobKeyError'
  }
}

/**
 * Refuses anything but `name/name/...` with no empty, `.` or `..` segment, no leading slash, no
 * backslash and no null byte. Keys are made by the server, so this only fires on a bug; it is the
 * last line of defence before a key becomes a file path (or an S3 key behind a path-style URL).
 */
export function assertValidBlobKey(key: string): void {
  if (key.length === 0 || key.length > 1024) throw new InvalidBlobKeyError(key)
  if (key.includes('\0') || key.includes('\\')) throw new InvalidBlobKeyError(key)
  if (path.posix.isAbsolute(key) || path.isAbsolute(key)) throw new InvalidBlobKeyError(key)
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') throw new InvalidBlobKeyError(key)
  }
}

/** What `put` names its temporary file: `<object>.<16 hex digits>.tmp`. */
const TEMP_FILE = /\.[0-9a-f]{16}\.tmp$/

const DIR_MODE = 0o700
const FILE_MODE = 0o600

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined
}

/** Missing file, or a path component that is a file rather than a directory. */
function isMissing(err: unknown): boolean {
  const code = errorCode(err)
  return code === 'ENOENT' || code === 'ENOTDIR'
}

/**
 * Objects as files under one root directory (`<root>/<key>`). Writes go to a temporary file next
 * to the target and are renamed into place only once the whole stream has been written and
 * flushed, so readers never see a partial object and a failed upload leaves nothing behind.
 * Directories are created 0700 and files 0600. Empty directories are left in place after a
 * delete (removing them would race with a concurrent `put` into the same directory).
 */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs'
  readonly root: string

  constructor(root: string) {
    this.root = path.resolve(root)
  }

  /**
   * The root exists (it is made on first use, as `put` would) and this process may read and
   * write it: a missing mount or a read-only folder fails the readiness probe.
   */
  async check(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: DIR_MODE })
    await access(this.root, constants.R_OK | constants.W_OK | constants.X_OK)
  }

  /** The absolute file path for `key`, refusing anything that would land outside the root. */
  pathFor(key: string): string {
    assertValidBlobKey(key)
    const resolved = path.resolve(this.root, key)
    const relative = path.relative(this.root, resolved)
    if (
      relative === '' ||
      relative === '..' ||
      relative.startsWith(`..${path.sep}`) ||
      path.isAbsolute(relative)
    ) {
      throw new InvalidBlobKeyError(key)
    }
    return resolved
  }

  async put(key: string, body: Readable): Promise<{ size: number }> {
    const target = this.pathFor(key)
    // Until pipeline listens, an error of the body (a client hanging up while we create the
    // directory) must not go unhandled; pipeline still sees it, as the stream's stored error.
    const ignore = (): void => undefined
    body.on('error', ignore)
    try {
      await mkdir(path.dirname(target), { recursive: true, mode: DIR_MODE })
    } catch (err) {
      body.off('error', ignore)
      throw err
    }
    const temp = `${target}.${randomBytes(8).toString('hex')}.tmp`
    // `wx`: never reuse an existing file; `flush`: fsync before close, so the rename publishes
    // durable bytes (the database row that points at this object is written next).
    const out = createWriteStream(temp, { flags: 'wx', mode: FILE_MODE, flush: true })
    try {
      const piping = pipeline(body, out)
      body.off('error', ignore)
      await piping
      await rename(temp, target)
    } catch (err) {
      // pipeline settles only after both streams have closed, so the file is no longer open.
      await rm(temp, { force: true }).catch(() => undefined)
      throw err
    }
    return { size: out.bytesWritten }
  }

  async get(key: string): Promise<Readable> {
    const file = this.pathFor(key)
    // Open first and stream from the open descriptor: a delete racing with this read cannot
    // turn into a stream error after we have promised the object exists.
    const handle = await open(file, 'r').catch((err: unknown) => {
      throw isMissing(err) ? new BlobNotFoundError(key) : err
    })
    try {
      if (!(await handle.stat()).isFile()) throw new BlobNotFoundError(key)
    } catch (err) {
      await handle.close()
      throw err
    }
    return handle.createReadStream()
  }

  async delete(key: string): Promise<void> {
    const file = this.pathFor(key)
    try {
      await unlink(file)
    } catch (err) {
      if (!isMissing(err)) throw err
    }
  }

  /**
   * Walks the folders under the prefix depth first; each folder's entries are read at once (a
   * BLOB's folder holds a few objects, the top level one entry per account). Files an upload is
   * still writing (or a crash left) are skipped: they are not objects.
   */
  async *list(prefix: string): AsyncIterable<StoredObject> {
    const slash = prefix.lastIndexOf('/')
    const folder = prefix.slice(0, slash + 1)
    if (folder !== '') assertValidBlobKey(folder.slice(0, -1))
    yield* this.#walk(folder, prefix.slice(slash + 1))
  }

  async *#walk(folder: string, namePrefix: string): AsyncGenerator<StoredObject> {
    let entries: Dirent[]
    try {
      entries = await readdir(path.join(this.root, folder), { withFileTypes: true })
    } catch (err) {
      if (isMissing(err)) return
      throw err
    }
    const kept = entries
      .filter((e) => e.name.startsWith(namePrefix))
      .filter((e) => e.isDirectory() || (e.isFile() && !TEMP_FILE.test(e.name)))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const entry of kept) {
      const key = `${folder}${entry.name}`
      if (entry.isDirectory()) {
        yield* this.#walk(`${key}/`, '')
        continue
      }
      // Deleted since the folder was read: not an object any more.
      const size = await stat(path.join(this.root, key)).then(
        (s) => s.size,
        (err: unknown) => {
          if (isMissing(err)) return undefined
          throw err
        },
      )
      if (size !== undefined) yield { key, size }
    }
  }

  async exists(key: string): Promise<boolean> {
    const file = this.pathFor(key)
    try {
      return (await stat(file)).isFile()
    } catch (err) {
      if (isMissing(err)) return false
      throw err
    }
  }
}
