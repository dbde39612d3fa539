import { createWriteStream } from 'node:fs'
import type { Writable } from 'node:stream'
import type { Kysely, Selectable } from 'kysely'
import type { AuditEventsTable, Database } from '../store/schema.js'
import { AUDIT_COLUMNS } from './chain.js'

export interface AuditExportArgs {
  format: 'jsonl' | 'csv'
  accountId?: string
  from?: string
  to?: string
  out?: string
}

const USAGE =
  'usage: coffer audit export --format jsonl|csv [--account <id>] [--from <iso>] [--to <iso>] [--out <file>]'

function isoTime(value: string, name: string): string {
  const t = Date.parse(value)
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(t))
    throw new Error(`${name} must be an ISO 8601 time\n${USAGE}`)
  return new Date(t).toISOString()
}

export function parseAuditExportArgs(args: string[]): AuditExportArgs {
  const values = new Map<string, string>()
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i]
    const value = args[i + 1]
    if (!name || !['--format', '--account', '--from', '--to', '--out'].includes(name) || !value)
      throw new Error(USAGE)
    values.set(name, value)
  }
  const format = values.get('--format')
  if (format !== 'jsonl' && format !== 'csv') throw new Error(USAGE)
  const from = values.get('--from')
  const to = values.get('--to')
  const accountId = values.get('--account')
  const out = values.get('--out')
  return {
    format,
    ...(accountId !== undefined ? { accountId } : {}),
    ...(from !== undefined ? { from: isoTime(from, '--from') } : {}),
    ...(to !== undefined ? { to: isoTime(to, '--to') } : {}),
    ...(out !== undefined ? { out } : {}),
  }
}

/** The CSV columns: an event's stored columns, in their order. */
export const EXPORT_COLUMNS = AUDIT_COLUMNS

/** One event as exported and as the API shows it: resources parsed, numbers as numbers. */
export function exportedEvent(row: Selectable<AuditEventsTable>): Record<string, unknown> {
  return {
    ...row,
    seq: Number(row.seq),
    status: Number(row.status),
    operations_consumed: Number(row.operations_consumed),
    resources: JSON.parse(row.resources),
  }
}

/** RFC 4180, every field quoted; a leading formula character is escaped for spreadsheets. */
function csvField(value: unknown): string {
  let text =
    value === null || value === undefined
      ? ''
      : typeof value === 'object'
        ? JSON.stringify(value)
        : String(value)
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return `"${text.replace(/"/g, '""')}"`
}

export function formatEvent(format: 'jsonl' | 'csv', row: Selectable<AuditEventsTable>): string {
  const event = exportedEvent(row)
  if (format === 'jsonl') return `${JSON.stringify(event)}\n`
  return `${EXPORT_COLUMNS.map((c) => csvField(event[c])).join(',')}\r\n`
}

const PAGE = 1000

async function write(out: Writable, text: string): Promise<void> {
  if (!out.write(text)) await new Promise((r) => out.once('drain', r))
}

/** Every matching event in chain order (account, then seq), page by page. */
export async function exportEvents(
  db: Kysely<Database>,
  args: AuditExportArgs,
  out: Writable,
): Promise<number> {
  if (args.format === 'csv') await write(out, `${EXPORT_COLUMNS.join(',')}\r\n`)
  let after: { account: string; seq: number } | undefined
  let n = 0
  for (;;) {
    let q = db.selectFrom('audit_events').selectAll()
    if (args.accountId !== undefined) q = q.where('account_id', '=', args.accountId)
    if (args.from !== undefined) q = q.where('at', '>=', args.from)
    if (args.to !== undefined) q = q.where('at', '<', args.to)
    if (after) {
      const a = after
      q = q.where((e) =>
        e.or([
          e('account_id', '>', a.account),
          e.and([e('account_id', '=', a.account), e('seq', '>', a.seq)]),
        ]),
      )
    }
    const rows = await q.orderBy('account_id').orderBy('seq').limit(PAGE).execute()
    for (const row of rows) await write(out, formatEvent(args.format, row))
    n += rows.length
    const last = rows[rows.length - 1]
    if (!last || rows.length < PAGE) return n
    after = { account: last.account_id, seq: Number(last.seq) }
  }
}

export async function runAuditExport(db: Kysely<Database>, args: AuditExportArgs): Promise<void> {
  if (!args.out) {
    await exportEvents(db, args, process.stdout)
    return
  }
  const file = createWriteStream(args.out, { flags: 'wx', mode: 0o600 })
  await new Promise<void>((resolve, reject) => {
    file.once('open', () => resolve())
    file.once('error', reject)
  })
  try {
    await exportEvents(db, args, file)
  } finally {
    await new Promise<void>((resolve) => file.end(resolve))
  }
}
