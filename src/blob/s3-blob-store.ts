import { Readable, Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { BlobNotFoundError, type BlobStore } from './blob-store.js'
import { assertValidBlobKey } from './fs-blob-store.js'

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
}

/**
 * Multipart part size: the S3 minimum. One part is uploaded while the next fills (lib-storage
 * copies each part once, so about four parts' worth of memory is in use at the peak).
 */
const PART_SIZE = 5 * 1024 * 1024
/** Parts uploaded at once per `put`. */
const QUEUE_SIZE = 1

/** An S3 error that means "no such object" (but not "no such bucket", a configuration error). */
function isNotFound(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false
  const { name, $metadata } = err as { name?: unknown; $metadata?: { httpStatusCode?: number } }
  if (name === 'NoSuchKey' || name === 'NotFound') return true
  return $metadata?.httpStatusCode === 404 && name !== 'NoSuchBucket'
}

/**
 * Objects in one S3 bucket (or any S3-compatible store). `put` streams through
 * `@aws-sdk/lib-storage`'s `Upload`: one PutObject for bodies under 5 MiB, a multipart upload
 * otherwise, with bounded memory either way. Nothing is visible under the key until the
 * upload completes, so a failed `put` leaves no object.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3'
  readonly #client: S3Client
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
    this.#client = new S3Client({
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle ?? false,
      credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
      // Content is AES-GCM encrypted (and so authenticated) before it gets here, and many
      // S3-compatible servers reject or mishandle the SDK's default CRC32 checksum headers and
      // aws-chunked trailers; send and check checksums only where the API demands them.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      requestHandler: {
        // Give up on a connection that cannot be made quickly...
        connectionTimeout: 5_000,
        // ...on a request (a 5 MiB part included) whose response has not started in 2 minutes...
        requestTimeout: 120_000,
        throwOnRequestTimeout: true,
        // ...and on a socket, download streams included, with no traffic for a minute.
        socketTimeout: 60_000,
      },
    })
  }

  async put(key: string, body: Readable): Promise<{ size: number }> {
    const objectKey = this.#key(key)
    let size = 0
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        size += chunk.length
        callback(null, chunk)
      },
    })
    const upload = new Upload({
      client: this.#client,
      params: {
        Bucket: this.#bucket,
        Key: objectKey,
        Body: counter,
        ContentType: 'application/octet-stream',
      },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
      // Once a multipart upload has failed, Upload sends AbortMultipartUpload (best effort).
      leavePartsOnError: false,
    })
    // The first error of the body wins. When Upload itself fails and stops reading, the counter
    // is destroyed and the pipeline reports a premature close, which is not the cause.
    let streamError: unknown
    const piping = pipeline(body, counter).catch((err: unknown) => {
      streamError = err
      // Fail fast: without this, done() would first wait for the parts already in flight.
      // Upload still aborts the multipart upload in the background once they have settled, and
      // it never completes an upload whose body failed, so no object appears under the key.
      if (!isPrematureClose(err)) void upload.abort()
    })
    try {
      await upload.done()
    } catch (uploadError) {
      // Upload has stopped reading: release the body, and wait until the pipeline has settled
      // so we know whether the body's own error came first.
      counter.destroy()
      await piping
      throw streamError !== undefined && !isPrematureClose(streamError) ? streamError : uploadError
    }
    await piping
    if (streamError !== undefined) throw streamError
    return { size }
  }

  async get(key: string): Promise<Readable> {
    const objectKey = this.#key(key)
    try {
      const res = await this.#client.send(
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
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: objectKey }))
    } catch (err) {
      if (!isNotFound(err)) throw err
    }
  }

  async exists(key: string): Promise<boolean> {
    const objectKey = this.#key(key)
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: objectKey }))
      return true
    } catch (err) {
      // HEAD responses have no body, so a missing bucket also looks like a plain 404 here.
      if (isNotFound(err)) return false
      throw err
    }
  }

  /** Closes the client's idle keep-alive sockets (for shutdown and tests). */
  close(): void {
    this.#client.destroy()
  }

  #key(key: string): string {
    assertValidBlobKey(key)
    return `${this.#prefix}${key}`
  }
}

function isPrematureClose(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'code' in err &&
    err.code === 'ERR_STREAM_PREMATURE_CLOSE'
  )
}
