import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { parseEnv } from 'node:util'

/**
 * Settings from a `.env` file (issue 17): `.env` in the working directory by default, the file
 * COFFER_ENV_FILE names, or none with COFFER_ENV_FILE=none. A variable set in the real
 * environment always wins over the file (process.loadEnvFile would do the same, but gives no
 * control over what a malformed line means: Node's parser silently glues it to the next key).
 * Values are never logged or quoted in errors; only line numbers and names are.
 */

/** Read by libuv or Node before any code runs: from a file they would seem set and do nothing. */
const TOO_LATE = ['UV_THREADPOOL_SIZE', 'NODE_OPTIONS']

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const ASSIGNMENT = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/
const QUOTES = ['"', "'", '`']

export class EnvFileError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid settings file:\n  - ${problems.join('\n  - ')}`)
    this.name = 'EnvFileError'
  }
}

/**
 * Every line is blank, a `# comment`, or `NAME=value` (optionally `export NAME=value`); a value
 * in quotes may span lines. Anything else is a mistake reported by line number (never by
 * content: the line may hold a secret). Returns the values as Node's parser reads them.
 */
export function parseEnvFile(text: string, label: string): Record<string, string> {
  const problems: string[] = []
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  let open: { quote: string; line: number } | undefined
  lines.forEach((raw, i) => {
    const n = i + 1
    if (open) {
      if (raw.includes(open.quote)) open = undefined
      return
    }
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) return
    const m = ASSIGNMENT.exec(line)
    if (!m) {
      problems.push(`${label} line ${n}: expected NAME=value`)
      return
    }
    const [, name = '', value = ''] = m
    if (!NAME.test(name)) {
      // Not quoted: a secret pasted on a line of its own (`postgres://u:pw@h/db?x=1`) is all name.
      problems.push(`${label} line ${n}: the text before = is not a variable name`)
      return
    }
    if (TOO_LATE.includes(name)) {
      problems.push(
        `${label} line ${n}: ${name} must be set in the environment itself: it is read before ${label} is`,
      )
    }
    if (name === 'COFFER_ENV_FILE') {
      problems.push(`${label} line ${n}: COFFER_ENV_FILE cannot be set in the file it names`)
    }
    const quote = QUOTES.find((q) => value.startsWith(q))
    if (quote && !value.slice(1).includes(quote)) open = { quote, line: n }
  })
  if (open) problems.push(`${label} line ${open.line}: the quoted value is never closed`)
  if (problems.length > 0) throw new EnvFileError(problems)
  return parseEnv(text.replace(/^\uFEFF/, '')) as Record<string, string>
}

export interface EnvFileOutcome {
  /** The file read, if any. */
  file: string | undefined
  /** Names taken from it (those the environment did not already set). */
  applied: string[]
}

/**
 * Reads the settings file into `env` under the variables already there. A missing `.env` is
 * fine (most deployments set the environment directly); a file COFFER_ENV_FILE names must exist.
 */
export function loadEnvFile(
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): EnvFileOutcome {
  const setting = env.COFFER_ENV_FILE?.trim() || undefined
  if (setting === 'none') return { file: undefined, applied: [] }
  const file = resolve(cwd, setting ?? '.env')
  const label = setting ? `COFFER_ENV_FILE ${file}` : file
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    if (code === 'ENOENT' && !setting) return { file: undefined, applied: [] }
    throw new EnvFileError([`${label} cannot be read (${code})`])
  }
  const values = parseEnvFile(text, label)
  const applied: string[] = []
  for (const [name, value] of Object.entries(values)) {
    if (env[name] !== undefined) continue
    env[name] = value
    applied.push(name)
  }
  return { file, applied }
}

/**
 * What the start log says about the file: the Coffer settings it gave by name, any others only
 * counted. A valid name need not be a setting: base64 without `+` or `/` is one, so a key pasted
 * on its own line as `<key>=` sets a variable named by the key, which must not reach a log.
 */
export function settingsForLog(outcome: EnvFileOutcome): {
  file: string | undefined
  settings: string[]
  other_settings: number
} {
  const settings = outcome.applied.filter((name) => name.startsWith('COFFER_'))
  return {
    file: outcome.file,
    settings,
    other_settings: outcome.applied.length - settings.length,
  }
}
