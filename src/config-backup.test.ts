import { resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './config.js'
import { DEFAULT_BACKUP_KEEP, MAX_BACKUP_KEEP } from './config-backup.js'

/** COFFER_BACKUP_SCHEDULE, _TARGET, _KEEP (issue 22, part 2): every bad value names its setting. */
const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return e.problems
    throw e
  }
  return []
}

const S3 = {
  COFFER_BLOB_STORE: 's3',
  COFFER_S3_BUCKET: 'coffer-blobs',
  COFFER_S3_ACCESS_KEY_ID: 'a',
  COFFER_S3_SECRET_ACCESS_KEY: 'b',
}

describe('config: scheduled backups', () => {
  it('is off by default', () => {
    expect(loadConfig({}).backup).toEqual({
      schedule: undefined,
      target: undefined,
      keep: DEFAULT_BACKUP_KEEP,
    })
  })

  it('takes a cron expression, a folder (resolved) and a count', () => {
    const config = loadConfig({
      COFFER_BACKUP_SCHEDULE: '30 2 * * *',
      COFFER_BACKUP_TARGET: 'backups',
      COFFER_BACKUP_KEEP: '14',
    })
    expect(config.backup).toEqual({
      schedule: '30 2 * * *',
      target: { kind: 'folder', path: resolve('backups') },
      keep: 14,
    })
  })

  it('takes s3://bucket/prefix on the configured S3 store', () => {
    const config = loadConfig({
      ...S3,
      COFFER_BACKUP_SCHEDULE: '@daily',
      COFFER_BACKUP_TARGET: 's3://coffer-backups/nightly/',
    })
    expect(config.backup.target).toEqual({
      kind: 's3',
      bucket: 'coffer-backups',
      prefix: 'nightly',
    })
  })

  it.each([
    [
      { COFFER_BACKUP_SCHEDULE: 'every night', COFFER_BACKUP_TARGET: '/b' },
      /COFFER_BACKUP_SCHEDULE must be a cron/,
    ],
    [
      { COFFER_BACKUP_SCHEDULE: '61 * * * *', COFFER_BACKUP_TARGET: '/b' },
      /COFFER_BACKUP_SCHEDULE must be a cron/,
    ],
    [
      { COFFER_BACKUP_SCHEDULE: '*/10 * * * * *', COFFER_BACKUP_TARGET: '/b' },
      /at most once a minute/,
    ],
    [{ COFFER_BACKUP_SCHEDULE: '0 3 * * *' }, /needs COFFER_BACKUP_TARGET/],
    [{ COFFER_BACKUP_TARGET: '/backups' }, /apply only with COFFER_BACKUP_SCHEDULE/],
    [{ COFFER_BACKUP_KEEP: '3' }, /apply only with COFFER_BACKUP_SCHEDULE/],
    [
      { COFFER_BACKUP_SCHEDULE: '0 3 * * *', COFFER_BACKUP_TARGET: 's3://coffer-backups/x' },
      /uses the configured S3 store/,
    ],
    [
      { ...S3, COFFER_BACKUP_SCHEDULE: '0 3 * * *', COFFER_BACKUP_TARGET: 's3://No_Bucket/x' },
      /needs a bucket name/,
    ],
    [
      { ...S3, COFFER_BACKUP_SCHEDULE: '0 3 * * *', COFFER_BACKUP_TARGET: 's3://bucket/a/../b' },
      /empty, \. or \.\. part/,
    ],
    [
      {
        COFFER_BACKUP_SCHEDULE: '0 3 * * *',
        COFFER_BACKUP_TARGET: '/b',
        COFFER_DATABASE_URL: ':memory:',
      },
      /not :memory:/,
    ],
  ])('refuses %o', (env, problem) => {
    expect(problemsOf(env)).toEqual([expect.stringMatching(problem)])
  })

  it.each([
    ['0', false],
    ['1', true],
    [String(MAX_BACKUP_KEEP), true],
    [String(MAX_BACKUP_KEEP + 1), false],
  ])('COFFER_BACKUP_KEEP=%s is accepted: %s', (keep, ok) => {
    const problems = problemsOf({
      COFFER_BACKUP_SCHEDULE: '0 3 * * *',
      COFFER_BACKUP_TARGET: '/b',
      COFFER_BACKUP_KEEP: keep,
    })
    expect(problems.length === 0).toBe(ok)
  })

  it('accepts a schedule of exactly once a minute', () => {
    expect(problemsOf({ COFFER_BACKUP_SCHEDULE: '* * * * *', COFFER_BACKUP_TARGET: '/b' })).toEqual(
      [],
    )
  })
})
