import { createWriteStream, rmSync } from 'node:fs'
import { finished } from 'node:stream/promises'
import type { Config } from '../../config.js'
import type { Store } from '../../store/db.js'
import { type ExportFormat, type ExportOptions, writeExport } from './consent-export.js'
import { ConsentKeys } from './consent-keys.js'
import { loadConsentSecret } from './consent-secret.js'

export const CONSENT_USAGE = `  consent export   a shop's consent history as CSV or JSON lines:
                   --shop <domain> [--format csv|jsonl] [--output <file>]
                   [--consumer <customer id or email>] [--identifiers]
`

export interface ExportArgs extends ExportOptions {
  /** A new file (never overwritten, mode 0600); standard output when absent. */
  output: string | undefined
}

/** `--shop x --format jsonl …` (also `--shop=x`); throws a message naming the problem. */
export function parseExportArgs(argv: readonly string[]): ExportArgs {
  const values = new Map<string, string>()
  let identifiers = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (arg === '--identifiers') {
      identifiers = true
      continue
    }
    const m = /^--(shop|format|output|consumer)(?:=(.*))?$/.exec(arg)
    if (!m) throw new Error(`consent export: unknown argument ${arg}`)
    const name = m[1] as string
    const value = m[2] ?? argv[++i]
    if (value === undefined || value === '')
      throw new Error(`consent export: --${name} needs a value`)
    if (values.has(name)) throw new Error(`consent export: --${name} given twice`)
    values.set(name, value)
  }
  const shop = values.get('shop')
  if (!shop) throw new Error('consent export: --shop <domain> is required')
  const format = values.get('format') ?? 'csv'
  if (format !== 'csv' && format !== 'jsonl') {
    throw new Error('consent export: --format must be csv or jsonl')
  }
  return {
    shop,
    format: format as ExportFormat,
    consumer: values.get('consumer'),
    identifiers,
    output: values.get('output'),
  }
}

/** Runs the export; the count of entries goes to standard error, the data to the file/stdout. */
export async function runConsentExport(config: Config, store: Store, args: ExportArgs) {
  const { secret } = await loadConsentSecret(config, store, { generate: false })
  const keys = new ConsentKeys(secret)
  if (args.output === undefined) {
    const count = await writeExport(store.db, keys, args, process.stdout)
    process.stderr.write(`exported ${count} consent history entries for ${args.shop}\n`)
    return
  }
  // Personal data: a new file readable by this user only, never an existing one overwritten.
  const out = createWriteStream(args.output, { flags: 'wx', mode: 0o600 })
  await new Promise<void>((resolve, reject) => {
    out.once('open', () => resolve())
    out.once('error', reject)
  })
  let count: number
  try {
    count = await writeExport(store.db, keys, args, out)
    out.end()
    await finished(out)
  } catch (error) {
    // No half export left behind to be mistaken for a complete one.
    out.destroy()
    rmSync(args.output, { force: true })
    throw error
  }
  process.stderr.write(
    `exported ${count} consent history entries for ${args.shop} to ${args.output}\n`,
  )
}
