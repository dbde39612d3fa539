import { Readable } from 'node:stream'
import {
  BlobNotFoundError,
  type BlobStore,
  BlobStoreUnavailableError,
  type StoredObject,
} from './blob-store.js'
import { assertValidBlobKey } from './fs-blob-store.js'
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  type CreateMultipartUploadCommandOutput,
  DeleteObjectCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type UploadPartCommandOutput,
} from './s3-sdk.js'

export interface S3BlobStoreOptions {
  /** Custom endpoint (MinIO, Ceph, R2, s3rver...); AWS S3 when absent. */
  endpoint?: string
  region: string
  bucket: string
  /** Both or neither; without them the SDK's default credential chain is used. */
  accessKeyId?: string
  secretAccessKey?: string
  /** `https://host/bucket/key` instead of `https://bucket.host/key` (MinIO and most others). */
  forcePathStyle?: boolean
  /** Folder inside the bucket for every key: `coffer` stores `a/...` as `coffer/a/...`. */
  prefix?: string
  /** Time limits of every call (COFFER_S3_*_MS); the defaults below when absent. */
  timeouts?: Partial<S3Timeouts>
}

export interface S3Timeouts {
  /** To open the TCP (and TLS) connection. */
  connectTimeoutMs: number
  /** Per attempt, until the response starts; also the longest silence of a download stream. */
  requestTimeoutMs: number
  /** Per call, all attempts and backoff included: the store never holds a request longer. */
  deadlineMs: number
}

/** Well under the request deadlines (30 s, uploads 10 min): a hung store answers 504 in 15 s. */
export const DEFAULT_S3_TIMEOUTS: S3Timeouts = {
  connectTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  deadlineMs: 15_000,
}

/** Steps that must not be sent twice: a repeated create leaves an upload no one aborts. */
type OnceOnly = 'CreateMultipartUpload' | 'CompleteMultipartUpload'

/**
 * Multipart part size: the S3 minimum. At most two part buffers exist per upload: one being
 * uploaded while the next fills, and each is sent as it is (no copy), so an upload holds about
 * 10 MiB however large the object.
 */
const PART_SIZE = 5 * 1024 * 1024

const ONCE_ONLY = new Set<string>([
  'CreateMultipartUpload',
  'CompleteMultipartUpload',
] satisfies OnceOnly[])

/**
 * Part buffers are reused across uploads: allocating two fresh 5 MiB buffers per upload left
 * the process's memory growing until the garbage collector caught up.
 */
const partPool: Buffer[] = []
const POOL_MAX = 8
const takePart = (): Buffer => partPool.pop() ?? Buffer.allocUnsafe(PART_SIZE)
const givePart = (b: Buffer | undefined) => {
  if (b && b.length === PART_SIZE && partPool.length < POOL_MAX) partPool.push(b)
}

/** An S3 error that means "no such object" (but not "no such bucket", a configuration error). */
function isNotFound(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  const { name, $metadata } = err as { name?: unknown; $metadata?: { httpStatusCode?: number } }
  if (name === 'NoSuchKey' || name === 'NotFound') return true
  return $metadata?.httpStatusCode === 404 && name !== 'NoSuchBucket'
}

/** A conditional write refused: an object exists under the key (`If-None-Match: *`). */
function isPreconditionFailed(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  const { name, $metadata } = err as { name?: unknown; $metadata?: { httpStatusCode?: number } }
  return name === 'PreconditionFailed' || $metadata?.httpStatusCode === 412
}

/** `put(…, { ifAbsent: true })` found an object under the key: nothing was written. */
export class ObjectExistsError extends Error {
  constructor(readonly key: string) {
    super(`an object exists under ${key}`)
    this.name = 'ObjectExistsError'
  }
}

/**
 * A time limit of the HTTP handler (connect, request, socket) as opposed to a refusal. The SDK
 * also names a reset connection `TimeoutError` (to retry it); that is a dropped connection.
 */
function isTimeout(err: unknown): boolean {
  const { name, code } = (err ?? {}) as { name?: unknown; code?: unknown }
  if (code === 'ECONNRESET' || code === 'EPIPE') return false
  return name === 'TimeoutError' || name === 'AbortError' || code === 'ETIMEDOUT'
}

/**
 * Objects in one S3 bucket (or any S3-compatible store). `put` streams: one PutObject for bodies
 * under 5 MiB, a multipart upload otherwise, with bounded memory either way. Nothing is visible
 * under the key until the upload completes, so a failed `put` leaves no object.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3'
  readonly #client: S3Client
  /** The same store, without retries, for the steps in `OnceOnly`. */
  readonly #onceClient: S3Client
  readonly #timeouts: S3Timeouts
  readonly #bucket: string
  readonly #prefix: string

  constructor(options: S3BlobStoreOptions) {
    const { accessKeyId, secretAccessKey } = options
    if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) {
      throw new Error('S3 blob store: give both accessKeyId and secretAccessKey, or neither')
    }
    this.#bucket = options.bucket
    const prefix = (options.prefix ?? '').replace(/^\/+|\/+$/g, '')
    this.#prefix = prefix === '' ? '' : `${prefix}/`
    const timeouts = { ...DEFAULT_S3_TIMEOUTS, ...options.timeouts }
    this.#timeouts = timeouts
    const clientConfig = (maxAttempts: number) => ({
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle ?? false,
      credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
      // Content is AES-GCM encrypted (and so authenticated) before it gets here, and many
      // S3-compatible servers reject or mishandle the SDK's default CRC32 checksum headers and
      // aws-chunked trailers; send and check checksums only where the API demands them.
      requestChecksumCalculation: 'WHEN_REQUIRED' as const,
      responseChecksumValidation: 'WHEN_REQUIRED' as const,
      // The SDK's standard strategy: retryable errors only, exponential backoff with full
      // jitter; `#send`'s deadline bounds the attempts and their waits together.
      maxAttempts,
      requestHandler: {
        connectionTimeout: timeouts.connectTimeoutMs,
        requestTimeout: timeouts.requestTimeoutMs,
        throwOnRequestTimeout: true,
        // A socket with no traffic (a download stream included) for as long is given up.
        socketTimeout: timeouts.requestTimeoutMs,
      },
    })
    this.#client = new S3Client(clientConfig(3))
    this.#onceClient = new S3Client(clientConfig(1))
  }

  /**
   * Streams the body into the bucket: one PutObject when it fits in a part, else a multipart
   * upload with one part in flight while the next fills. On any failure the multipart upload is
   * aborted (nothing becomes visible under the key) and the original error is rethrown.
   * With `ifAbsent` the write is conditional (`If-None-Match: *` on the PutObject or the
   * CompleteMultipartUpload): a store that honours it refuses to replace an object, even one
   * created after the caller looked, and `put` throws ObjectExistsError. Stores that ignore the
   * header (s3rver, older MinIO/Ceph) replace it: callers that must never replace keep their
   * own existence check before (decisions 243).
   */
  async put(
    key: string,
    body: Readable,
    options: { ifAbsent?: boolean } = {},
  ): Promise<{ size: number }> {
    const Key = this.#key(key)
    const condition = options.ifAbsent ? { IfNoneMatch: '*' } : {}
    const Bucket = this.#bucket
    let uploadId: string | undefined
    const parts: { ETag: string | undefined; PartNumber: number }[] = []
    let buffer: Buffer = takePart()
    let spare: Buffer | undefined
    let fill = 0
    let size = 0
    let inFlight: Promise<void> | undefined
    let partNumber = 0
    // A failing body must end the upload at once, even while a part is waiting on the server.
    let failBody: (error: unknown) => void = () => {}
    const bodyFailed = new Promise<never>((_, reject) => {
      failBody = reject
    })
    bodyFailed.catch(() => {})
    body.once('error', (error) => failBody(error))
    // Only once no request can still be reading them.
    const release = () => {
      givePart(buffer)
      givePart(spare)
    }

    const sendPart = async (data: Buffer, PartNumber: number) => {
      uploadId ??= (
        await this.#send<CreateMultipartUploadCommandOutput>(
          new CreateMultipartUploadCommand({
            Bucket,
            Key,
            ContentType: 'application/octet-stream',
          }),
        )
      ).UploadId
      const res = await this.#send<UploadPartCommandOutput>(
        new UploadPartCommand({
          Bucket,
          Key,
          UploadId: uploadId,
          PartNumber,
          Body: data,
          ContentLength: data.length,
        }),
      )
      parts.push({ ETag: res.ETag, PartNumber })
    }
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        let offset = 0
        while (offset < chunk.length) {
          const n = Math.min(chunk.length - offset, PART_SIZE - fill)
          chunk.copy(buffer, fill, offset, offset + n)
          fill += n
          offset += n
          size += n
          if (fill < PART_SIZE) continue
          // A full part: wait for the previous one (its buffer becomes the spare), then send.
          if (inFlight) await Promise.race([inFlight, bodyFailed])
          const full = buffer
          buffer = spare ?? takePart()
          spare = undefined
          fill = 0
          const sending = sendPart(full, ++partNumber).then(() => {
            spare = full
          })
          // Handled when awaited; this only keeps an early failure from being "unhandled".
          sending.catch(() => {})
          inFlight = sending
        }
      }
      if (inFlight) await Promise.race([inFlight, bodyFailed])
      if (uploadId === undefined) {
        await this.#send(
          new PutObjectCommand({
            Bucket,
            Key,
            Body: buffer.subarray(0, fill),
            ContentLength: fill,
            ContentType: 'application/octet-stream',
            ...condition,
          }),
        )
        release()
        return { size }
      }
      if (fill > 0) await sendPart(buffer.subarray(0, fill), ++partNumber)
      parts.sort((a, b) => a.PartNumber - b.PartNumber)
      await this.#send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
          ...condition,
        }),
      )
      release()
      return { size }
    } catch (error) {
      if (!body.destroyed) body.destroy()
      // Abort in the background once the part in flight has settled (best effort: s3rver cannot
      // abort, and a stalled server must not hold the caller); the object never exists.
      const abort = async () => {
        await inFlight?.catch(() => {})
        release()
        if (uploadId === undefined) return
        await this.#send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId: uploadId }))
      }
      abort().catch(() => {})
      const cause = error instanceof BlobStoreUnavailableError ? error.cause : error
      if (options.ifAbsent && isPreconditionFailed(cause)) throw new ObjectExistsError(key)
      throw error
    }
  }

  async get(key: string): Promise<Readable> {
    const objectKey = this.#key(key)
    try {
      const res = await this.#send<GetObjectCommandOutput>(
        new GetObjectCommand({ Bucket: this.#bucket, Key: objectKey }),
      )
      const body = res.Body
      if (body === undefined) return Readable.from([])
      if (!(body instanceof Readable)) {
        throw new Error('S3 blob store: GetObject returned a body that is not a Node stream')
      }
      return body
    } catch (err) {
      if (isNotFound(err)) throw new BlobNotFoundError(key)
      throw err
    }
  }

  async delete(key: string): Promise<void> {
    const objectKey = this.#key(key)
    try {
      await this.#send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: objectKey }))
    } catch (err) {
      if (!isNotFound(err)) throw err
    }
  }

  async exists(key: string): Promise<boolean> {
    const objectKey = this.#key(key)
    try {
      await this.#send(new HeadObjectCommand({ Bucket: this.#bucket, Key: objectKey }))
      return true
    } catch (err) {
      // HEAD responses have no body, so a missing bucket also looks like a plain 404 here.
      if (isNotFound(err)) return false
      throw err
    }
  }

  /**
   * ListObjectsV2 page by page (at most 1,000 keys each), each page one call within the
   * deadline. Keys outside the configured prefix are never listed.
   */
  async *list(prefix: string): AsyncIterable<StoredObject> {
    if (prefix !== '') assertValidBlobKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix)
    let token: string | undefined
    do {
      const page: ListObjectsV2CommandOutput = await this.#send(
        new ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: `${this.#prefix}${prefix}`,
          ...(token ? { ContinuationToken: token } : {}),
        }),
      )
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined) continue
        yield { key: object.Key.slice(this.#prefix.length), size: object.Size ?? 0 }
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
  }

  /**
   * One HEAD of the bucket: the endpoint answers, the credentials are accepted and the bucket
   * exists (needs `s3:ListBucket` on it, which the adapter's listing-free design otherwise
   * does not use).
   */
  async check(): Promise<void> {
    // The start-up check names the setting at fault from the SDK's own error.
    await this.#send(new HeadBucketCommand({ Bucket: this.#bucket })).catch((error) => {
      throw error instanceof BlobStoreUnavailableError ? error.cause : error
    })
  }

  /** Closes the clients' idle keep-alive sockets (for shutdown and tests). */
  close(): void {
    this.#client.destroy()
    this.#onceClient.destroy()
  }

  /**
   * One call within the total deadline, retried only when it is safe to repeat. Every failure
   * but "no such object" (which callers read) becomes a BlobStoreUnavailableError.
   */
  async #send<Out = unknown>(command: { constructor: { name: string } }): Promise<Out> {
    const operation = command.constructor.name.replace(/Command$/, '')
    const client = ONCE_ONLY.has(operation) ? this.#onceClient : this.#client
    const { deadlineMs } = this.#timeouts
    const deadline = new AbortController()
    let timer: NodeJS.Timeout | undefined
    // The signal stops the request in flight; the race also ends a wait between retries, which
    // the SDK sleeps through without looking at the signal.
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        deadline.abort()
        reject(new Error(`no answer within ${deadlineMs} ms`))
      }, deadlineMs)
    })
    try {
      // The SDK types `send` per command class; every command passed here is an S3 command.
      const send = client.send.bind(client) as (c: unknown, o: object) => Promise<unknown>
      const sent = send(command, { abortSignal: deadline.signal })
      sent.catch(() => {})
      return (await Promise.race([sent, expired])) as Out
    } catch (err) {
      if (isNotFound(err)) throw err
      throw new BlobStoreUnavailableError(
        operation,
        deadline.signal.aborted || isTimeout(err),
        deadlineMs,
        err,
      )
    } finally {
      clearTimeout(timer)
    }
  }

  #key(key: string): string {
    assertValidBlobKey(key)
    return `${this.#prefix}${key}`
  }
}
