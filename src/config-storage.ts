import { isAbsolute, join, resolve } from 'node:path'
import { isPostgresUrl } from './store/db.js'
import { pgTlsSettings } from './store/pg-tls.js'

/**
 * Where data lives: the database (`COFFER_DATABASE_URL`) and the BLOB store (`COFFER_BLOB_*`,
 * `COFFER_S3_*`), read and checked for syntax here; whether the store answers is checked at
 * start (blob/startup-check.ts), and the cluster rule by `clusterBlobProblems`.
 */

export interface S3Config {
  endpoint: string | undefined
  region: string
  bucket: string
  accessKeyId: string | undefined
  secretAccessKey: string | undefined
  forcePathStyle: boolean
  prefix: string
  /** Connect timeout of every S3 call (COFFER_S3_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs: number
  /** Per attempt, until the response starts (COFFER_S3_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number
  /** Per call, retries included (COFFER_S3_DEADLINE_MS). */
  deadlineMs: number
}

export interface BlobSettings {
  blobStore: 'fs' | 's3'
  /** COFFER_BLOB_STORE was given (on PostgreSQL the store must be chosen, not defaulted). */
  blobStoreExplicit: boolean
  /** Folder of the filesystem blob store (COFFER_BLOB_DIR, default `blobs/` in the data folder). */
  blobDir: string
  /** The operator declares `blobDir` one folder every node sees (COFFER_BLOB_DIR_SHARED). */
  blobDirShared: boolean
  s3: S3Config | undefined
  /** Bound on the start-up check that the store answers (COFFER_BLOB_CHECK_TIMEOUT_MS). */
  blobCheckTimeoutMs: number
}

/**
 * `postgres://…` and `postgresql://…` as given; `:memory:` as given (an empty database per
 * process: tests and trials); an absolute path as given; `./x` and `../x` from the working
 * directory, as before; any other relative path (`coffer.db`, `db/coffer.db`) inside the data
 * folder, as the default `coffer.db` is. Another scheme (`sqlite://`, `mysql://`) is refused.
 */
export function databaseUrl(raw: string | undefined, dataDir: string, problems: string[]): string {
  const value = (raw ?? '').trim()
  if (value === '') return join(dataDir, 'coffer.db')
  if (isPostgresUrl(value)) {
    // TLS parameters (sslmode, sslrootcert) are checked here; the CA file is read at start.
    pgTlsSettings(value, problems)
    return value
  }
  if (value === ':memory:' || isAbsolute(value)) return value
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(value)) {
    problems.push(
      'COFFER_DATABASE_URL must be postgres://… (or postgresql://…), or a SQLite file path',
    )
    return value
  }
  if (value === '.' || value === '..' || value.endsWith('/')) {
    problems.push('COFFER_DATABASE_URL must name a SQLite file, not a folder')
    return value
  }
  return /^\.\.?[/\\]/.test(value) ? resolve(value) : resolve(dataDir, value)
}

type Flag = (name: string, raw: string | undefined, problems: string[]) => boolean
type Url = (name: string, raw: string | undefined, fallback: string, problems: string[]) => string
type Int = (name: string, fallback: number, min: number, max: number) => number

/** S3 bucket names: 3 to 63 lowercase letters, digits, dots and hyphens (AWS naming rules). */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/

export function blobSettings(
  env: NodeJS.ProcessEnv,
  dataDir: string,
  read: { flag: Flag; url: Url; int: Int },
  problems: string[],
): BlobSettings {
  const raw = env.COFFER_BLOB_STORE?.trim() || undefined
  const blobStore = raw ?? 'fs'
  if (blobStore !== 'fs' && blobStore !== 's3') problems.push('COFFER_BLOB_STORE must be fs or s3')
  const dirGiven = env.COFFER_BLOB_DIR?.trim() || undefined
  const blobDirShared = read.flag('COFFER_BLOB_DIR_SHARED', env.COFFER_BLOB_DIR_SHARED, problems)
  if (blobStore === 's3' && (dirGiven || blobDirShared)) {
    problems.push('COFFER_BLOB_DIR and COFFER_BLOB_DIR_SHARED apply to COFFER_BLOB_STORE=fs only')
  }
  if (blobDirShared && !dirGiven) {
    problems.push('COFFER_BLOB_DIR_SHARED=true needs COFFER_BLOB_DIR: the folder every node shares')
  }
  // 10 s: longer than a healthy store ever takes to answer one HEAD, short enough that a
  // deployment with a wrong endpoint fails while someone is watching it.
  const blobCheckTimeoutMs = read.int('COFFER_BLOB_CHECK_TIMEOUT_MS', 10_000, 100, 120_000)
  return {
    blobStore: blobStore as BlobSettings['blobStore'],
    blobStoreExplicit: raw !== undefined,
    blobDir: dirGiven ? resolve(dirGiven) : join(dataDir, 'blobs'),
    blobDirShared,
    s3: blobStore === 's3' ? s3Settings(env, read, problems) : undefined,
    blobCheckTimeoutMs,
  }
}

function s3Settings(
  env: NodeJS.ProcessEnv,
  read: { flag: Flag; url: Url; int: Int },
  problems: string[],
): S3Config {
  const bucket = env.COFFER_S3_BUCKET?.trim() ?? ''
  if (!bucket) problems.push('COFFER_S3_BUCKET is required with COFFER_BLOB_STORE=s3')
  else if (!BUCKET_NAME.test(bucket) || bucket.includes('..')) {
    problems.push(
      `COFFER_S3_BUCKET must be a bucket name (3 to 63 lowercase letters, digits, dots and hyphens), not ${JSON.stringify(bucket)}`,
    )
  }
  const accessKeyId = env.COFFER_S3_ACCESS_KEY_ID || undefined
  const secretAccessKey = env.COFFER_S3_SECRET_ACCESS_KEY || undefined
  if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) {
    problems.push(
      'COFFER_S3_ACCESS_KEY_ID and COFFER_S3_SECRET_ACCESS_KEY go together: give both, or neither (the AWS default credential chain)',
    )
  }
  const region = env.COFFER_S3_REGION?.trim() || 'us-east-1'
  if (!/^[a-z0-9-]{1,64}$/.test(region)) {
    problems.push('COFFER_S3_REGION must be a region name such as us-east-1')
  }
  const endpointRaw = env.COFFER_S3_ENDPOINT?.trim() || undefined
  // Issue 18: a store that hangs answers 504 within the deadline instead of after minutes.
  const connectTimeoutMs = read.int('COFFER_S3_CONNECT_TIMEOUT_MS', 5_000, 100, 60_000)
  const requestTimeoutMs = read.int('COFFER_S3_REQUEST_TIMEOUT_MS', 10_000, 100, 600_000)
  const deadlineMs = read.int('COFFER_S3_DEADLINE_MS', 15_000, 100, 3_600_000)
  if (connectTimeoutMs > deadlineMs || requestTimeoutMs > deadlineMs) {
    problems.push(
      'COFFER_S3_CONNECT_TIMEOUT_MS and COFFER_S3_REQUEST_TIMEOUT_MS must not exceed COFFER_S3_DEADLINE_MS',
    )
  }
  return {
    endpoint: endpointRaw ? read.url('COFFER_S3_ENDPOINT', endpointRaw, '', problems) : undefined,
    region,
    bucket,
    accessKeyId,
    secretAccessKey,
    forcePathStyle: read.flag(
      'COFFER_S3_FORCE_PATH_STYLE',
      env.COFFER_S3_FORCE_PATH_STYLE,
      problems,
    ),
    prefix: env.COFFER_S3_PREFIX || '',
    connectTimeoutMs,
    requestTimeoutMs,
    deadlineMs,
  }
}

/** A store call may not outlast the upload it serves (COFFER_BLOB_UPLOAD_TIMEOUT_MS). */
export function s3DeadlineProblems(
  s3: S3Config | undefined,
  blobUploadTimeoutMs: number,
): string[] {
  if (!s3 || s3.deadlineMs <= blobUploadTimeoutMs) return []
  return ['COFFER_S3_DEADLINE_MS must not exceed COFFER_BLOB_UPLOAD_TIMEOUT_MS']
}

/**
 * Issue 12, point 7: nodes sharing one PostgreSQL database must share one BLOB store, or a BLOB
 * uploaded through one node is missing on every other. The default folder is per node, so on
 * PostgreSQL the store is chosen explicitly: S3, or a folder the operator declares shared.
 * SQLite is one node: its default stays.
 */
export function clusterBlobProblems(config: {
  databaseUrl: string
  dataDir: string
  blobStore: 'fs' | 's3'
  blobStoreExplicit: boolean
  blobDirShared: boolean
}): string[] {
  if (!isPostgresUrl(config.databaseUrl)) return []
  const todayAt = `(BLOBs stored so far are in ${join(config.dataDir, 'blobs')})`
  if (!config.blobStoreExplicit) {
    return [
      `COFFER_BLOB_STORE must be set with a PostgreSQL database, where several nodes share the data: s3, or fs with COFFER_BLOB_DIR (a folder every node mounts) and COFFER_BLOB_DIR_SHARED=true ${todayAt}`,
    ]
  }
  if (config.blobStore === 'fs' && !config.blobDirShared) {
    return [
      `COFFER_BLOB_STORE=fs with a PostgreSQL database needs COFFER_BLOB_DIR (a folder every node mounts) and COFFER_BLOB_DIR_SHARED=true, or use COFFER_BLOB_STORE=s3 ${todayAt}`,
    ]
  }
  return []
}
