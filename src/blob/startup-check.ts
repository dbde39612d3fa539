import { randomBytes } from 'node:crypto'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { BlobStore } from './blob-store.js'

/** What the start-up check needs to name the setting at fault. */
export type BlobStoreTarget =
  | { kind: 'fs'; dir: string; dirSetting: 'COFFER_BLOB_DIR' | 'COFFER_DATA_DIR' }
  | { kind: 's3'; bucket: string; endpoint: string | undefined; region: string }

/** The store cannot be used: the message names the setting to look at, never a secret. */
export class BlobStoreUnusableError extends Error {
  constructor(message: string) {
    super(`the BLOB store is not usable: ${message}`)
    this.name = 'BlobStoreUnusableError'
  }
}

const TIMEOUT_SETTING = 'COFFER_BLOB_CHECK_TIMEOUT_MS'

/**
 * Before the server writes anything, proves the configured store can be used, within
 * `timeoutMs`: a filesystem folder can be created and a file written into it (and removed);
 * an S3 bucket answers a HEAD with the given endpoint, region and credentials. Rejects with a
 * BlobStoreUnusableError naming the setting; readiness (`GET /readyz`) keeps checking later.
 */
export async function checkBlobStoreAtStart(
  store: BlobStore,
  target: BlobStoreTarget,
  timeoutMs: number,
): Promise<void> {
  const work = target.kind === 'fs' ? probeFolder(target.dir) : store.check()
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((done) => {
    timer = setTimeout(() => done('timeout'), timeoutMs)
  })
  try {
    const outcome = await Promise.race([work.then(() => 'ok' as const), timeout])
    if (outcome === 'timeout') {
      work.catch(() => {})
      throw new BlobStoreUnusableError(
        `${where(target)} did not answer within ${timeoutMs} ms (${TIMEOUT_SETTING})`,
      )
    }
  } catch (error) {
    if (error instanceof BlobStoreUnusableError) throw error
    throw new BlobStoreUnusableError(describe(error, target))
  } finally {
    clearTimeout(timer)
  }
}

/** Creates the folder (0700, as the store does) and writes, then removes, a small file in it. */
async function probeFolder(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const probe = path.join(dir, `.coffer-write-check-${randomBytes(6).toString('hex')}`)
  try {
    await writeFile(probe, 'ok', { flag: 'wx', mode: 0o600 })
  } finally {
    await rm(probe, { force: true }).catch(() => {})
  }
}

function where(target: BlobStoreTarget): string {
  if (target.kind === 'fs') return `${target.dirSetting} folder ${target.dir}`
  return target.endpoint ? `COFFER_S3_ENDPOINT ${target.endpoint}` : 'AWS S3'
}

function describe(error: unknown, target: BlobStoreTarget): string {
  const e = (typeof error === 'object' && error !== null ? error : {}) as {
    code?: unknown
    name?: unknown
    $metadata?: { httpStatusCode?: number }
  }
  const code = typeof e.code === 'string' ? e.code : undefined
  if (target.kind === 'fs') {
    return `${where(target)} cannot be created or written to by this process (${code ?? 'error'})`
  }
  if (e.name === 'CredentialsProviderError')
    return 'no S3 credentials were found: set COFFER_S3_ACCESS_KEY_ID and COFFER_S3_SECRET_ACCESS_KEY, or configure the AWS credential chain'
  const status = e.$metadata?.httpStatusCode
  const bucket = `COFFER_S3_BUCKET ${JSON.stringify(target.bucket)}`
  if (status === 404 || e.name === 'NoSuchBucket' || e.name === 'NotFound')
    return `${bucket} does not exist at ${where(target)}`
  if (status === 403 || status === 401)
    return `${where(target)} refused access to ${bucket}: check COFFER_S3_ACCESS_KEY_ID and COFFER_S3_SECRET_ACCESS_KEY (or the AWS credential chain) and that they may list the bucket`
  if (status === 301 || status === 400)
    return `${where(target)} refused the request for ${bucket} (HTTP ${status}): check COFFER_S3_REGION (${target.region}) and COFFER_S3_FORCE_PATH_STYLE`
  if (status !== undefined) return `${where(target)} answered HTTP ${status} for ${bucket}`
  const name = typeof e.name === 'string' ? e.name : 'error'
  return `${where(target)} could not be reached (${code ?? name})`
}
