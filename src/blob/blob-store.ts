import type { Readable } from 'node:stream'

/**
 * Where BLOB bytes live. Keys are made by the server (`blobKey`), never from user input; file
 * names are metadata in the database. Everything streams: an object is never held whole in
 * memory. The database row is the truth: callers write the object first and then the row, and
 * delete the row first and then the object.
 */
export interface BlobStore {
  /** Human-readable kind for logs and errors: `fs` or `s3`. */
  readonly kind: string
  /**
   * Stores the stream under `key`, replacing nothing: keys are unique per content version.
   * Resolves with the number of bytes stored. If the stream errors (e.g. a size limit), the
   * promise rejects with that error and no object (and no partial temporary file) remains.
   */
  put(key: string, body: Readable): Promise<{ size: number }>
  /** Streams the object; rejects with `BlobNotFoundError` when it does not exist. */
  get(key: string): Promise<Readable>
  /** Deletes the object; deleting a missing object is not an error. */
  delete(key: string): Promise<void>
  /** True when the object exists. */
  exists(key: string): Promise<boolean>
  /**
   * Resolves when the store can be reached (readiness probe, `GET /readyz`); rejects otherwise.
   * Cheap: one metadata call, no object is read or written.
   */
  check(): Promise<void>
  /**
   * Every object whose key starts with `prefix` (`''`, or a key prefix such as `a/`), paged so
   * memory stays bounded however many there are; in no promised order. Temporary files of
   * uploads in progress are not objects. For `coffer check` (orphaned objects) and the retention
   * of scheduled backups on S3.
   */
  list(prefix: string): AsyncIterable<StoredObject>
}

/** One object, as `BlobStore.list` names it. */
export interface StoredObject {
  key: string
  /** Bytes stored (encrypted size for BLOB content). */
  size: number
}

export class BlobNotFoundError extends Error {
  constructor(key: string) {
    super(`blob object not found: ${key}`)
    this.name = 'BlobNotFoundError'
  }
}

/** `a/<account>/v/<vault>/b/<blob>/<object>`: every content version gets its own object id. */
export function blobKey(
  accountId: string,
  vaultId: string,
  blobId: string,
  objectId: string,
): string {
  for (const part of [accountId, vaultId, blobId, objectId]) {
    if (!/^[0-9a-f-]{36}$/.test(part)) throw new Error('blob key parts must be lowercase UUIDs')
  }
  return `a/${accountId}/v/${vaultId}/b/${blobId}/${objectId}`
}

/**
 * The store itself failed: it refused, dropped or never answered the connection, ran past its
 * deadline, or answered with an error that is not "no such object" (a missing bucket, denied
 * credentials, a 5xx). Not the client's doing; callers answer 503 (or 504 when `timedOut`).
 */
export class BlobStoreUnavailableError extends Error {
  constructor(
    /** The store's step that failed, e.g. `PutObject`. */
    readonly operation: string,
    /** True when the step ran past a time limit (connect, request or total deadline). */
    readonly timedOut: boolean,
    /** The total deadline of the step, for the client's message. */
    readonly deadlineMs: number,
    cause: unknown,
  ) {
    const detail = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)
    super(`blob store ${operation} failed${timedOut ? ' (timed out)' : ''}: ${detail}`, { cause })
    this.name = 'BlobStoreUnavailableError'
  }
}
