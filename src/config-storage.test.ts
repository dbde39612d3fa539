import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, clusterBlobProblems, loadConfig } from './config.js'

/** Issue 17 (settings that fail early) and issue 12, point 7 (cluster-safe BLOB store). */
const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e.problems
    throw e
  }
  return []
}

const DATA = '/srv/coffer-data'
const PG = 'postgres://coffer@db.internal:5432/coffer'

describe('config: COFFER_DATABASE_URL', () => {
  const url = (value: string) =>
    loadConfig({ COFFER_DATA_DIR: DATA, COFFER_DATABASE_URL: value }).databaseUrl

  it('defaults to coffer.db in the data folder', () => {
    expect(loadConfig({ COFFER_DATA_DIR: DATA }).databaseUrl).toBe(join(DATA, 'coffer.db'))
  })

  it('resolves a bare file name and a plain relative path inside the data folder', () => {
    expect(url('coffer.db')).toBe(join(DATA, 'coffer.db'))
    expect(url('other.sqlite')).toBe(join(DATA, 'other.sqlite'))
    expect(url('db/coffer.db')).toBe(join(DATA, 'db', 'coffer.db'))
  })

  it('keeps ./ and ../ paths relative to the working directory, as before', () => {
    expect(url('./coffer.db')).toBe(resolve('coffer.db'))
    expect(url('../elsewhere/coffer.db')).toBe(resolve('..', 'elsewhere', 'coffer.db'))
  })

  it('keeps absolute paths, :memory: and PostgreSQL URLs as given', () => {
    expect(url('/var/lib/coffer/main.db')).toBe('/var/lib/coffer/main.db')
    expect(url(':memory:')).toBe(':memory:')
    expect(url(PG)).toBe(PG)
    expect(url('postgresql://localhost/coffer')).toBe('postgresql://localhost/coffer')
  })

  it('refuses other schemes and folders, naming the setting', () => {
    for (const bad of ['sqlite://coffer.db', 'mysql://localhost/coffer', 'file:coffer.db']) {
      expect(problemsOf({ COFFER_DATABASE_URL: bad }), bad).toEqual([
        'COFFER_DATABASE_URL must be postgres://… (or postgresql://…), or a SQLite file path',
      ])
    }
    for (const bad of ['.', '..', 'db/']) {
      expect(problemsOf({ COFFER_DATABASE_URL: bad }), bad).toEqual([
        'COFFER_DATABASE_URL must name a SQLite file, not a folder',
      ])
    }
  })
})

describe('config: TLS to PostgreSQL in COFFER_DATABASE_URL (issue 22)', () => {
  it('takes the libpq modes and refuses a fallback to clear text at start', () => {
    for (const mode of ['disable', 'require', 'verify-ca', 'verify-full'])
      expect(problemsOf({ COFFER_DATABASE_URL: `${PG}?sslmode=${mode}` }), mode).toEqual([])
    expect(problemsOf({ COFFER_DATABASE_URL: `${PG}?sslmode=prefer` })).toEqual([
      'COFFER_DATABASE_URL: sslmode=prefer may fall back to a connection in clear, which Coffer does not do: use sslmode=require, verify-ca or verify-full (or disable)',
    ])
    expect(problemsOf({ COFFER_DATABASE_URL: `${PG}?sslmode=verify-full&sslkey=/k` })).toEqual([
      'COFFER_DATABASE_URL: sslkey (client certificates) is not supported; authenticate with a password over sslmode=verify-full',
    ])
  })
})

describe('config: BLOB store settings', () => {
  it('defaults to the blobs/ folder of the data folder, chosen implicitly', () => {
    const c = loadConfig({ COFFER_DATA_DIR: DATA })
    expect(c).toMatchObject({
      blobStore: 'fs',
      blobStoreExplicit: false,
      blobDir: join(DATA, 'blobs'),
      blobDirShared: false,
      s3: undefined,
      blobCheckTimeoutMs: 10_000,
    })
  })

  it('takes COFFER_BLOB_DIR (relative to the working directory) and COFFER_BLOB_DIR_SHARED', () => {
    const c = loadConfig({
      COFFER_BLOB_STORE: 'fs',
      COFFER_BLOB_DIR: 'shared/blobs',
      COFFER_BLOB_DIR_SHARED: 'true',
    })
    expect(c).toMatchObject({
      blobStore: 'fs',
      blobStoreExplicit: true,
      blobDir: resolve('shared/blobs'),
      blobDirShared: true,
    })
    expect(loadConfig({ COFFER_BLOB_DIR: '/mnt/blobs' }).blobDir).toBe('/mnt/blobs')
  })

  it('refuses a shared flag without a folder, and fs settings with s3', () => {
    expect(problemsOf({ COFFER_BLOB_DIR_SHARED: 'true' })).toEqual([
      'COFFER_BLOB_DIR_SHARED=true needs COFFER_BLOB_DIR: the folder every node shares',
    ])
    expect(problemsOf({ COFFER_BLOB_DIR_SHARED: 'maybe' })).toEqual([
      'COFFER_BLOB_DIR_SHARED must be true or false',
    ])
    expect(
      problemsOf({ COFFER_BLOB_STORE: 's3', COFFER_S3_BUCKET: 'b12', COFFER_BLOB_DIR: '/x' }),
    ).toEqual(['COFFER_BLOB_DIR and COFFER_BLOB_DIR_SHARED apply to COFFER_BLOB_STORE=fs only'])
    expect(problemsOf({ COFFER_BLOB_STORE: 'S3' })).toEqual(['COFFER_BLOB_STORE must be fs or s3'])
  })

  it('bounds COFFER_BLOB_CHECK_TIMEOUT_MS from 100 to 120000', () => {
    const at = (v: string) => loadConfig({ COFFER_BLOB_CHECK_TIMEOUT_MS: v }).blobCheckTimeoutMs
    expect(at('100')).toBe(100)
    expect(at('120000')).toBe(120_000)
    for (const bad of ['99', '120001', '1.5', 'soon'])
      expect(problemsOf({ COFFER_BLOB_CHECK_TIMEOUT_MS: bad })).toEqual([
        'COFFER_BLOB_CHECK_TIMEOUT_MS must be an integer from 100 to 120000',
      ])
  })
})

describe('config: S3 settings are checked for syntax at start', () => {
  const s3 = (extra: Record<string, string>) => ({
    COFFER_BLOB_STORE: 's3',
    COFFER_S3_BUCKET: 'coffer-blobs',
    ...extra,
  })

  it('reads a complete setting', () => {
    const c = loadConfig(
      s3({
        COFFER_S3_ENDPOINT: 'http://127.0.0.1:9000/',
        COFFER_S3_REGION: 'eu-west-3',
        COFFER_S3_ACCESS_KEY_ID: 'AKIA',
        COFFER_S3_SECRET_ACCESS_KEY: 'secret',
        COFFER_S3_FORCE_PATH_STYLE: 'true',
        COFFER_S3_PREFIX: 'coffer',
      }),
    )
    expect(c.s3).toEqual({
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-west-3',
      bucket: 'coffer-blobs',
      accessKeyId: 'AKIA',
      secretAccessKey: 'secret',
      forcePathStyle: true,
      prefix: 'coffer',
      connectTimeoutMs: 5_000,
      requestTimeoutMs: 10_000,
      deadlineMs: 15_000,
    })
  })

  it('requires a bucket named by the S3 rules: 3 to 63 characters', () => {
    expect(problemsOf({ COFFER_BLOB_STORE: 's3' })).toEqual([
      'COFFER_S3_BUCKET is required with COFFER_BLOB_STORE=s3',
    ])
    expect(problemsOf(s3({ COFFER_S3_BUCKET: 'abc' }))).toEqual([])
    expect(problemsOf(s3({ COFFER_S3_BUCKET: 'a'.repeat(63) }))).toEqual([])
    for (const bad of ['ab', 'a'.repeat(64), 'Coffer', 'my_bucket', '-abc', 'a..b', 's3://b'])
      expect(problemsOf(s3({ COFFER_S3_BUCKET: bad }))[0], bad).toMatch(
        /^COFFER_S3_BUCKET must be a bucket name/,
      )
  })

  it('refuses an endpoint that is not an http(s) URL without credentials', () => {
    expect(problemsOf(s3({ COFFER_S3_ENDPOINT: 'minio:9000' }))).toEqual([
      'COFFER_S3_ENDPOINT must be an http(s) URL without credentials, query or fragment',
    ])
    expect(problemsOf(s3({ COFFER_S3_ENDPOINT: 'not a url' }))).toEqual([
      'COFFER_S3_ENDPOINT must be an http(s) URL',
    ])
    const withSecret = problemsOf(s3({ COFFER_S3_ENDPOINT: 'https://key:hunter2@s3.example' }))
    expect(withSecret).toEqual([
      'COFFER_S3_ENDPOINT must be an http(s) URL without credentials, query or fragment',
    ])
  })

  it('takes both keys or neither, and a region name', () => {
    expect(problemsOf(s3({ COFFER_S3_ACCESS_KEY_ID: 'AKIA' }))).toEqual([
      'COFFER_S3_ACCESS_KEY_ID and COFFER_S3_SECRET_ACCESS_KEY go together: give both, or neither (the AWS default credential chain)',
    ])
    expect(problemsOf(s3({ COFFER_S3_REGION: 'EU West' }))).toEqual([
      'COFFER_S3_REGION must be a region name such as us-east-1',
    ])
  })

  it('bounds the S3 time limits, each at its edges (issue 18)', () => {
    const limits = (extra: Record<string, string>) => loadConfig(s3(extra)).s3
    const all = { COFFER_S3_CONNECT_TIMEOUT_MS: '100', COFFER_S3_REQUEST_TIMEOUT_MS: '100' }
    expect(limits({ ...all, COFFER_S3_DEADLINE_MS: '100' })).toMatchObject({
      connectTimeoutMs: 100,
      requestTimeoutMs: 100,
      deadlineMs: 100,
    })
    const top = {
      COFFER_S3_CONNECT_TIMEOUT_MS: '60000',
      COFFER_S3_REQUEST_TIMEOUT_MS: '600000',
      COFFER_S3_DEADLINE_MS: '600000',
    }
    expect(limits(top)).toMatchObject({ connectTimeoutMs: 60_000, deadlineMs: 600_000 })
    const cases: [string, string, string][] = [
      ['COFFER_S3_CONNECT_TIMEOUT_MS', '99', 'from 100 to 60000'],
      ['COFFER_S3_CONNECT_TIMEOUT_MS', '60001', 'from 100 to 60000'],
      ['COFFER_S3_REQUEST_TIMEOUT_MS', '99', 'from 100 to 600000'],
      ['COFFER_S3_REQUEST_TIMEOUT_MS', '600001', 'from 100 to 600000'],
      ['COFFER_S3_DEADLINE_MS', '99', 'from 100 to 3600000'],
      ['COFFER_S3_DEADLINE_MS', 'soon', 'from 100 to 3600000'],
    ]
    for (const [name, bad, range] of cases)
      expect(problemsOf(s3({ ...top, COFFER_S3_DEADLINE_MS: '600000', [name]: bad }))).toContain(
        `${name} must be an integer ${range}`,
      )
  })

  it('keeps each attempt within the deadline, and the deadline within the upload deadline', () => {
    const order =
      'COFFER_S3_CONNECT_TIMEOUT_MS and COFFER_S3_REQUEST_TIMEOUT_MS must not exceed COFFER_S3_DEADLINE_MS'
    expect(problemsOf(s3({ COFFER_S3_DEADLINE_MS: '10000' }))).toEqual([])
    expect(problemsOf(s3({ COFFER_S3_DEADLINE_MS: '9999' }))).toEqual([order])
    expect(
      problemsOf(s3({ COFFER_S3_DEADLINE_MS: '5000', COFFER_S3_REQUEST_TIMEOUT_MS: '5000' })),
    ).toEqual([])
    expect(
      problemsOf(s3({ COFFER_S3_DEADLINE_MS: '4999', COFFER_S3_REQUEST_TIMEOUT_MS: '4999' })),
    ).toEqual([order])
    const upload = { COFFER_BLOB_UPLOAD_TIMEOUT_MS: '60000', COFFER_S3_DEADLINE_MS: '60000' }
    expect(problemsOf(s3(upload))).toEqual([])
    expect(problemsOf(s3({ ...upload, COFFER_S3_DEADLINE_MS: '60001' }))).toEqual([
      'COFFER_S3_DEADLINE_MS must not exceed COFFER_BLOB_UPLOAD_TIMEOUT_MS',
    ])
  })
})

describe('config: listen addresses', () => {
  it('takes IP addresses and host names', () => {
    for (const host of [
      '127.0.0.1',
      '0.0.0.0',
      '::',
      '::1',
      'localhost',
      'api.example.com',
      'coffer_api',
    ])
      expect(loadConfig({ COFFER_HOST: host }).host, host).toBe(host)
    expect(loadConfig({ COFFER_HOST: '10.0.0.2' }).consentHost).toBe('10.0.0.2')
  })

  it('refuses anything else, for each listener, naming the setting', () => {
    expect(problemsOf({ COFFER_HOST: '[::1]' })).toEqual([
      'COFFER_HOST must be an IP address or a host name, not "[::1]" (write an IPv6 address without brackets)',
    ])
    for (const bad of [
      'http://localhost',
      'my host',
      '256.1.1.1',
      'a:b',
      '-api',
      `${'a'.repeat(64)}.com`,
    ])
      expect(problemsOf({ COFFER_HOST: bad })[0], bad).toMatch(/^COFFER_HOST must be an IP address/)
    expect(problemsOf({ COFFER_CONSENT_HOST: 'x/y' })[0]).toMatch(/^COFFER_CONSENT_HOST must be/)
    expect(problemsOf({ COFFER_METRICS_HOST: 'x y' })[0]).toMatch(/^COFFER_METRICS_HOST must be/)
  })
})

describe('the cluster BLOB rule (PostgreSQL: nodes share data, so they must share BLOBs)', () => {
  const rule = (env: Record<string, string>) =>
    clusterBlobProblems(loadConfig({ COFFER_DATA_DIR: DATA, ...env }))

  it('keeps the per-node default on SQLite', () => {
    expect(rule({})).toEqual([])
    expect(rule({ COFFER_DATABASE_URL: 'coffer.db', COFFER_BLOB_DIR: '/x' })).toEqual([])
  })

  it('on PostgreSQL refuses the implicit default, saying what to set', () => {
    const [problem, ...rest] = rule({ COFFER_DATABASE_URL: PG })
    expect(rest).toEqual([])
    expect(problem).toMatch(/^COFFER_BLOB_STORE must be set with a PostgreSQL database/)
    expect(problem).toContain('COFFER_BLOB_DIR_SHARED=true')
    expect(problem).toContain(join(DATA, 'blobs'))
  })

  it('on PostgreSQL refuses fs in a folder not declared shared', () => {
    for (const env of <Record<string, string>[]>[
      { COFFER_BLOB_STORE: 'fs' },
      { COFFER_BLOB_STORE: 'fs', COFFER_BLOB_DIR: '/mnt/b' },
    ])
      expect(rule({ COFFER_DATABASE_URL: PG, ...env })[0]).toMatch(
        /^COFFER_BLOB_STORE=fs with a PostgreSQL database needs COFFER_BLOB_DIR .* and COFFER_BLOB_DIR_SHARED=true/,
      )
  })

  it('on PostgreSQL takes s3, or fs in a folder declared shared', () => {
    expect(
      rule({ COFFER_DATABASE_URL: PG, COFFER_BLOB_STORE: 's3', COFFER_S3_BUCKET: 'b12' }),
    ).toEqual([])
    expect(
      rule({
        COFFER_DATABASE_URL: PG,
        COFFER_BLOB_STORE: 'fs',
        COFFER_BLOB_DIR: '/mnt/shared/blobs',
        COFFER_BLOB_DIR_SHARED: 'true',
      }),
    ).toEqual([])
  })
})
