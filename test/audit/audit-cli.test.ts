import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cofferFails, openCofferSqliteFile, runCoffer } from '../helpers/processes.js'

/**
 * The audit trail from the command line (issue 13): data-changing commands leave events,
 * `coffer audit verify` checks the chains and names a changed, removed or reordered event,
 * `coffer audit export` writes JSON lines or CSV. On the SQLite file of a data folder (the
 * command's default database), tampered with directly.
 */
let dir: string
let env: Record<string, string>
let accountId: string
let adminId: string

const db = () => openCofferSqliteFile(join(dir, 'coffer.db'))
const events = (account: string) =>
  db()
    .prepare('select * from audit_events where account_id = ? order by seq')
    .all(account) as Array<Record<string, unknown>>

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'coffer-audit-cli-'))
  env = { COFFER_DATA_DIR: dir }
  const created = JSON.parse((await runCoffer(['account', 'create'], env)).stdout)
  accountId = created.account_id
  const d = db()
  adminId = (
    d.prepare('select id from users where account_id = ?').get(accountId) as { id: string }
  ).id
  d.close()
}, 60_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('data-changing commands are audited', () => {
  it('account create, mfa reset, keys rotate each leave one event', async () => {
    expect(events(accountId).map((e) => e.operation)).toEqual(['cli.account.create'])
    expect(events(accountId)[0]).toMatchObject({
      method: 'CLI',
      credential_kind: 'cli',
      decision: 'allowed',
      client_ip: 'cli',
    })
    await runCoffer(['mfa', 'reset', accountId, adminId], env)
    const reset = events(accountId).at(-1)
    expect(reset).toMatchObject({ operation: 'cli.mfa.reset', actor_user_id: adminId })
    expect(JSON.parse(String(reset?.resources))).toMatchObject({ user: [adminId] })
    await runCoffer(['keys', 'rotate'], env)
    expect(events('').map((e) => e.operation)).toContain('cli.keys.rotate')
  }, 60_000)
})

describe('coffer audit verify', () => {
  const verify = async () => {
    try {
      const { stdout } = await runCoffer(['audit', 'verify'], env)
      return { code: 0, report: JSON.parse(stdout) }
    } catch (e) {
      const failed = e as { code: number; stdout: string }
      return { code: failed.code, report: JSON.parse(failed.stdout) }
    }
  }

  it('passes on an untouched trail, and finds a changed, a removed and a reordered event', async () => {
    // A few more events to tamper with.
    for (let i = 0; i < 4; i++) await runCoffer(['mfa', 'reset', accountId, adminId], env)
    const ok = await verify()
    expect(ok.code).toBe(0)
    expect(ok.report).toMatchObject({ ok: true, problems: [] })
    expect(ok.report.events).toBeGreaterThanOrEqual(6)

    const d = db()
    // Changed: the decision of event 2.
    d.prepare("update audit_events set decision = 'denied' where account_id = ? and seq = 2").run(
      accountId,
    )
    let r = await verify()
    expect(r.code).toBe(2)
    expect(r.report.problems).toEqual([
      expect.objectContaining({ account_id: accountId, seq: 2, problem: 'changed' }),
    ])
    d.prepare("update audit_events set decision = 'allowed' where account_id = ? and seq = 2").run(
      accountId,
    )
    expect((await verify()).code).toBe(0)

    // Reordered: events 3 and 4 swap places.
    const swap = d.transaction(() => {
      d.prepare('update audit_events set seq = -1 where account_id = ? and seq = 3').run(accountId)
      d.prepare('update audit_events set seq = 3 where account_id = ? and seq = 4').run(accountId)
      d.prepare('update audit_events set seq = 4 where account_id = ? and seq = -1').run(accountId)
    })
    swap()
    r = await verify()
    expect(r.code).toBe(2)
    expect(r.report.problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ seq: 3, problem: 'reordered' }),
        expect.objectContaining({ seq: 4, problem: 'reordered' }),
      ]),
    )
    swap()
    expect((await verify()).code).toBe(0)

    // Removed: event 5.
    d.prepare('delete from audit_events where account_id = ? and seq = 5').run(accountId)
    r = await verify()
    expect(r.code).toBe(2)
    expect(r.report.problems).toEqual(
      expect.arrayContaining([expect.objectContaining({ seq: 5, problem: 'removed' })]),
    )
    d.close()
  }, 120_000)
})

describe('coffer audit export', () => {
  it('writes JSON lines and CSV, filtered by account and time', async () => {
    const jsonl = (
      await runCoffer(['audit', 'export', '--format', 'jsonl', '--account', accountId], env)
    ).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(jsonl.length).toBeGreaterThan(3)
    expect(jsonl.every((e) => e.account_id === accountId)).toBe(true)
    expect(jsonl[0]).toMatchObject({ seq: 1, operation: 'cli.account.create' })
    expect(typeof jsonl[0].resources).toBe('object')
    const out = join(dir, 'export.csv')
    await runCoffer(
      ['audit', 'export', '--format', 'csv', '--account', accountId, '--out', out],
      env,
    )
    const lines = readFileSync(out, 'utf8').trim().split('\r\n')
    expect(lines[0]?.split(',').slice(0, 3)).toEqual(['account_id', 'seq', 'id'])
    expect(lines).toHaveLength(jsonl.length + 1)
    const future = (
      await runCoffer(
        ['audit', 'export', '--format', 'jsonl', '--from', '2999-01-01T00:00:00Z'],
        env,
      )
    ).stdout
    expect(future).toBe('')
    const bad = await cofferFails(['audit', 'export', '--format', 'xml'], env)
    expect(bad.stderr).toMatch(/--format jsonl\|csv/)
  }, 60_000)
})
