import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { EnvFileError, loadEnvFile, parseEnvFile, settingsForLog } from './config-env-file.js'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
function folderWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-envfile-'))
  dirs.push(dir)
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  return dir
}
function problemsOf(run: () => unknown): string[] {
  try {
    run()
  } catch (e) {
    expect(e).toBeInstanceOf(EnvFileError)
    return (e as EnvFileError).problems
  }
  throw new Error('expected an EnvFileError')
}

describe('.env syntax', () => {
  it('reads NAME=value lines, comments, export, quotes and multi-line quoted values', () => {
    const text = [
      '# Coffer settings',
      '',
      'COFFER_PORT=9090',
      '  export COFFER_HOST = 0.0.0.0  ',
      'COFFER_LOG_LEVEL=warn # trailing comment',
      'COFFER_S3_PREFIX="with # hash"',
      "COFFER_STOREFRONT_SECRET='single'",
      'COFFER_CONSENT_JWT_SECRET="first',
      'second"',
      'COFFER_EMPTY=',
      'WINDOWS=crlf\r',
    ].join('\n')
    expect(parseEnvFile(text, '.env')).toEqual({
      COFFER_PORT: '9090',
      COFFER_HOST: '0.0.0.0',
      COFFER_LOG_LEVEL: 'warn',
      COFFER_S3_PREFIX: 'with # hash',
      COFFER_STOREFRONT_SECRET: 'single',
      COFFER_CONSENT_JWT_SECRET: 'first\nsecond',
      COFFER_EMPTY: '',
      WINDOWS: 'crlf',
    })
  })

  it('refuses a line that is not NAME=value, by number, never quoting it', () => {
    const text = 'COFFER_PORT=1\nCOFFER_MASTER_KEY hunter2secret\n9X=1\nOK=1\nbad-name=2\n'
    const problems = problemsOf(() => parseEnvFile(text, '/srv/.env'))
    expect(problems).toEqual([
      '/srv/.env line 2: expected NAME=value',
      '/srv/.env line 3: the text before = is not a variable name',
      '/srv/.env line 5: the text before = is not a variable name',
    ])
    expect(problems.join()).not.toContain('hunter2secret')
  })

  it('never quotes what stands before = on a bad line: it may be a secret pasted on its own', () => {
    // A URL with a query, a YAML-style line without a space: neither is NAME=value.
    const text = [
      'COFFER_DATABASE_URL=',
      'postgres://coffer:hunter2pw@db/coffer?sslmode=require',
      'COFFER_S3_SECRET_ACCESS_KEY:wJalrXUtnFEMI=x',
    ].join('\n')
    const problems = problemsOf(() => parseEnvFile(text, '.env'))
    expect(problems).toEqual([
      '.env line 2: the text before = is not a variable name',
      '.env line 3: the text before = is not a variable name',
    ])
  })

  it('logs the names of Coffer settings only: a key pasted on its own line as NAME= is no name', () => {
    // Base64 without + or / is a valid variable name: `<key>=` sets a variable named by the key.
    const key = 'c2VjcmV0a2V5YmFzZTY0MzJieXRlc2xvbmcxMjM0NTY3'
    const dir = folderWith({ '.env': `COFFER_PORT=1\nCOFFER_MASTER_KEY=\n${key}=\nTZ=UTC\n` })
    const outcome = loadEnvFile({}, dir)
    const logged = JSON.stringify(settingsForLog(outcome))
    expect(logged).not.toContain(key)
    const { settings, ...rest } = settingsForLog(outcome)
    expect(settings.sort()).toEqual(['COFFER_MASTER_KEY', 'COFFER_PORT'])
    expect(rest).toEqual({ file: join(dir, '.env'), other_settings: 2 })
  })

  it('refuses a quoted value that is never closed', () => {
    expect(problemsOf(() => parseEnvFile('A=1\nB="open\nC=2\n', '.env'))).toEqual([
      '.env line 2: the quoted value is never closed',
    ])
  })

  it('refuses settings read before any file could be', () => {
    expect(
      problemsOf(() => parseEnvFile('UV_THREADPOOL_SIZE=8\nCOFFER_ENV_FILE=x\n', '.env')),
    ).toEqual([
      '.env line 1: UV_THREADPOOL_SIZE must be set in the environment itself: it is read before .env is',
      '.env line 2: COFFER_ENV_FILE cannot be set in the file it names',
    ])
  })
})

describe('loading .env', () => {
  it('fills in what the environment does not set; the environment wins', () => {
    const dir = folderWith({ '.env': 'COFFER_PORT=9090\nCOFFER_HOST=0.0.0.0\nCOFFER_EMPTY=x\n' })
    const env: NodeJS.ProcessEnv = { COFFER_PORT: '8080', COFFER_EMPTY: '' }
    expect(loadEnvFile(env, dir)).toEqual({
      file: join(dir, '.env'),
      applied: ['COFFER_HOST'],
    })
    expect(env).toEqual({ COFFER_PORT: '8080', COFFER_HOST: '0.0.0.0', COFFER_EMPTY: '' })
  })

  it('a missing .env is fine; COFFER_ENV_FILE=none reads nothing', () => {
    const env: NodeJS.ProcessEnv = {}
    expect(loadEnvFile(env, folderWith({}))).toEqual({ file: undefined, applied: [] })
    const dir = folderWith({ '.env': 'COFFER_PORT=1\n' })
    const none: NodeJS.ProcessEnv = { COFFER_ENV_FILE: 'none' }
    expect(loadEnvFile(none, dir)).toEqual({ file: undefined, applied: [] })
    expect(none.COFFER_PORT).toBeUndefined()
  })

  it('COFFER_ENV_FILE names another file (relative to the working directory), which must exist', () => {
    const dir = folderWith({ 'prod.env': 'COFFER_PORT=7000\n', '.env': 'COFFER_PORT=1\n' })
    const env: NodeJS.ProcessEnv = { COFFER_ENV_FILE: 'prod.env' }
    expect(loadEnvFile(env, dir).applied).toEqual(['COFFER_PORT'])
    expect(env.COFFER_PORT).toBe('7000')
    expect(problemsOf(() => loadEnvFile({ COFFER_ENV_FILE: 'gone.env' }, dir))).toEqual([
      `COFFER_ENV_FILE ${join(dir, 'gone.env')} cannot be read (ENOENT)`,
    ])
  })

  it('a .env that cannot be read is an error, not silence', () => {
    const dir = folderWith({})
    mkdirSync(join(dir, '.env'))
    expect(problemsOf(() => loadEnvFile({}, dir))).toEqual([
      `${join(dir, '.env')} cannot be read (EISDIR)`,
    ])
  })
})
