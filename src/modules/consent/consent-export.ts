import type { Writable } from 'node:stream'
import type { Executor } from '../../store/executor.js'
import * as repo from './consent.repo.js'
import type { ConsentKeys } from './consent-keys.js'
import { lapsesAt, PREFERENCE_FIELDS, type Preferences } from './retention.js'

/**
 * `coffer consent export`: a shop's consent history (every change, in recording order) as CSV
 * or JSON lines, for a merchant who must show a regulator how and when consent was given.
 * Consumers appear as `consumer_ref` (their keyed digest: stable, not reversible without the
 * consent secret); their customer id or email only with `identifiers`.
 */

export type ExportFormat = 'csv' | 'jsonl'

export interface ExportOptions {
  shop: string
  format: ExportFormat
  /** Only this consumer's history (a customer id or an email). */
  consumer?: string | undefined
  /** Include the decrypted customer id or email. */
  identifiers: boolean
}

export interface HistoryEntry {
  at: string
  shop: string
  consumer_ref: string
  /** Null when the consumer's record has expired (nobody chose; see decisions.md). */
  consumer?: string | null
  consumer_kind: string | null
  action: string
  provider: string | null
  privacy_center_id: string | null
  client_id: string | null
  changes: Record<string, { from: boolean | null; to: boolean | null }>
  state: Preferences
  /** For an explicit change: when that choice lapses unless renewed (opt-outs never do). */
  cookie_choice_valid_until: string | null
  gpc: boolean | null
  user_agent: string | null
}

const PAGE = 500

/** Emails are looked up as the API stores them (trimmed, lowercased); customer ids as given. */
export function normalizeConsumer(value: string): string {
  return value.includes('@') ? value.trim().toLowerCase() : value
}

export async function* historyEntries(
  db: Executor,
  keys: ConsentKeys,
  options: ExportOptions,
): AsyncGenerator<HistoryEntry> {
  const digest =
    options.consumer === undefined
      ? undefined
      : keys.digest(options.shop, normalizeConsumer(options.consumer))
  let after = ''
  for (;;) {
    const rows = await repo.listEvents(db, options.shop, after, PAGE, digest)
    for (const row of rows) yield entryOf(row, keys, options.identifiers)
    if (rows.length < PAGE) return
    after = (rows[rows.length - 1] as repo.ExportRow).id
  }
}

function entryOf(row: repo.ExportRow, keys: ConsentKeys, identifiers: boolean): HistoryEntry {
  return {
    at: row.at,
    shop: row.shop,
    consumer_ref: row.consumer_digest,
    ...(identifiers
      ? {
          consumer:
            row.consumer_sealed === null
              ? null
              : keys.open(row.shop, row.consumer_digest, row.consumer_sealed),
        }
      : {}),
    consumer_kind: row.consumer_kind,
    action: row.action,
    provider: row.provider,
    privacy_center_id: row.privacy_center_id,
    client_id: row.client_id,
    changes: JSON.parse(row.changes),
    state: JSON.parse(row.state),
    cookie_choice_valid_until:
      row.action === 'updated' ? (lapsesAt(new Date(row.at))?.toISOString() ?? null) : null,
    gpc: row.gpc === null ? null : row.gpc === 1,
    user_agent: row.user_agent,
  }
}

function csvColumns(identifiers: boolean): string[] {
  return [
    'at',
    'shop',
    'consumer_ref',
    ...(identifiers ? ['consumer'] : []),
    'consumer_kind',
    'action',
    'provider',
    'privacy_center_id',
    'client_id',
    'changes',
    ...PREFERENCE_FIELDS,
    'cookie_choice_valid_until',
    'gpc',
    'user_agent',
  ]
}

/**
 * One CSV cell (RFC 4180). Text that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`,
 * tab, CR first: the user agent is the client's to choose) is prefixed with `'`.
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return ''
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value)
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return /[",\r\n]|^\s|\s$/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

function csvLine(entry: HistoryEntry, columns: string[]): string {
  const flat: Record<string, unknown> = { ...entry, ...entry.state }
  return `${columns.map((c) => csvCell(flat[c])).join(',')}\r\n`
}

async function write(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await new Promise((resolve) => out.once('drain', resolve))
}

/** Writes the export to `out`; returns the number of history entries written. */
export async function writeExport(
  db: Executor,
  keys: ConsentKeys,
  options: ExportOptions,
  out: Writable,
): Promise<number> {
  const columns = csvColumns(options.identifiers)
  if (options.format === 'csv') await write(out, `${columns.join(',')}\r\n`)
  let count = 0
  for await (const entry of historyEntries(db, keys, options)) {
    await write(
      out,
      options.format === 'csv' ? csvLine(entry, columns) : `${JSON.stringify(entry)}\n`,
    )
    count++
  }
  return count
}
