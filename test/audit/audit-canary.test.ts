import { PassThrough } from 'node:stream'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AuditSink } from '../../src/audit/sink.js'
import { b64, buildTestApp, type TestApp } from '../helpers/app.js'
import { optionForm } from '../helpers/search-fixtures.js'

/**
 * No secret, password, content, attribute value or search value ever reaches the trail
 * (issue 13): every kind of client-supplied value carries a unique canary string, and no audit
 * row holds any of them — nor any credential the requests presented or received.
 */
let t: TestApp
/** What the streaming copy (COFFER_AUDIT_SINK) wrote, as a sink on stdout would. */
const sinkOutput: string[] = []
beforeAll(async () => {
  t = await buildTestApp()
  const out = new PassThrough()
  out.on('data', (c) => sinkOutput.push(String(c)))
  const sink = new AuditSink(out)
  t.deps.audit?.onStored((events) => sink.write(events))
  // Events stored before the copy was attached (the harness's own first request).
  before = (await t.deps.store.db.selectFrom('audit_events').select('id').execute()).length
})
let before = 0
afterAll(() => t.close())

const CANARY = {
  username: 'canaryuser7f3a',
  password: 'canary-password-9c1d-long',
  attribute: 'canary-attribute-5e2b',
  content: 'canary-content-a41f',
  search: 'canary-search-0d77',
  wrongPassword: 'canary-wrong-pass-33aa',
  groupName: 'canary-group-b8e1',
  vaultName: 'canary-vault-6c0f',
}

describe('the canary test', () => {
  it('no client value nor credential appears in any audit event', async () => {
    const auth = t.admin.api_key
    const secrets: string[] = [auth, t.admin.password]
    const vault = (
      await t.api.post('/v1/vaults', { auth, form: { name: CANARY.vaultName } })
    ).json().vault.id
    const schema = await t.api.post(`/v1/vaults/${vault}/schemas`, {
      auth,
      form: {
        schema: b64({ name: 'person', fields: [{ name: 'name', type: 'string', index: true }] }),
      },
    })
    expect(schema.statusCode, schema.body).toBe(200)
    const schemaId = schema.json().schema.id
    const doc = await t.api.post(`/v2/vaults/${vault}/documents`, {
      auth,
      json: { document: { name: CANARY.content }, schema_id: schemaId },
    })
    expect(doc.statusCode, doc.body).toBe(200)
    const search = await t.api.post(`/v1/vaults/${vault}/search`, {
      auth,
      form: optionForm({
        schema_id: schemaId,
        filter: { name: { type: 'eq', value: CANARY.search } },
      }),
    })
    expect(search.statusCode, search.body).toBe(200)
    const group = await t.api.post('/v1/groups', {
      auth,
      form: {
        name: CANARY.groupName,
        policy: b64([{ Resources: ['Vault::.*'], Activities: 'R' }]),
      },
    })
    expect(group.statusCode, group.body).toBe(200)
    const user = await t.api.post('/v1/users', {
      auth,
      form: {
        username: CANARY.username,
        password: CANARY.password,
        attributes: b64({ note: CANARY.attribute }),
        group_ids: group.json().group.group_id ?? group.json().group.id,
      },
    })
    expect(user.statusCode, user.body).toBe(200)
    secrets.push(user.json().user.api_key)
    const login = await t.api.post('/v1/auth/login', {
      form: {
        account_id: t.admin.account_id,
        username: CANARY.username,
        password: CANARY.password,
      },
    })
    expect(login.statusCode, login.body).toBe(200)
    secrets.push(login.json().user.access_token)
    const wrong = await t.api.post('/v1/auth/login', {
      form: {
        account_id: t.admin.account_id,
        username: CANARY.username,
        password: CANARY.wrongPassword,
      },
    })
    expect(wrong.statusCode).toBe(401)
    const users = await t.api.post('/v1/users/search', {
      auth,
      multipart: optionForm({ filter: { note: { type: 'eq', value: CANARY.search } } }),
    })
    expect(users.statusCode).toBeLessThan(500)
    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth,
      json: {
        name: 'canary',
        not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
        policy: [{ Resources: ['Vault::.*'], Activities: 'R' }],
      },
    })
    const httpAuth = sat.json().scoped_access_token.http_auth
    secrets.push(httpAuth.username, httpAuth.password)
    expect((await t.api.get('/v1/vaults', { basic: httpAuth })).statusCode).toBe(200)
    // A wrong secret presented is not kept either.
    expect((await t.api.get('/v1/vaults', { auth: 'canary-presented-key-1234' })).statusCode).toBe(
      401,
    )
    secrets.push('canary-presented-key-1234')

    const rows = await sql<Record<string, unknown>>`select * from audit_events`.execute(
      t.deps.store.db,
    )
    const dump = JSON.stringify(rows.rows)
    expect(rows.rows.length).toBeGreaterThan(10)
    const copy = sinkOutput.join('')
    // Every stored event reached the copy (one line each).
    expect(copy.trim().split('\n').length).toBe(rows.rows.length - before)
    for (const value of [...Object.values(CANARY), ...secrets]) {
      expect(dump, value).not.toContain(value)
      expect(copy, value).not.toContain(value)
    }
    // Also not in a form a dump would hide: base64 of the content and of the attributes.
    expect(dump).not.toContain(b64({ note: CANARY.attribute }))
  })
})

describe.runIf(process.env.TEST_DATABASE === 'postgres')(
  'the append-only trigger (PostgreSQL)',
  () => {
    it('refuses UPDATE, DELETE and TRUNCATE of events, except a DELETE by the pruner (coffer.audit_prune)', async () => {
      const db = t.deps.store.db
      await t.api.get('/v1/vaults', { auth: t.admin.api_key })
      await expect(sql`update audit_events set decision = 'denied'`.execute(db)).rejects.toThrow(
        /append-only/,
      )
      await expect(sql`delete from audit_events`.execute(db)).rejects.toThrow(/append-only/)
      // TRUNCATE fires no row trigger: a statement trigger refuses it, with the pruner's setting too.
      await expect(sql`truncate audit_events`.execute(db)).rejects.toThrow(/append-only/)
      await db.transaction().execute(async (trx) => {
        await sql`set local coffer.audit_prune = 'on'`.execute(trx)
        await expect(sql`truncate audit_events`.execute(trx)).rejects.toThrow(/append-only/)
      })
      const before = Number(
        (await sql<{ n: string }>`select count(*) as n from audit_events`.execute(db)).rows[0]?.n,
      )
      // The pruner's setting lets a DELETE through (rolled back here), never an UPDATE.
      // (PostgreSQL ends that transaction without committing anything.)
      await db.transaction().execute(async (trx) => {
        await sql`set local coffer.audit_prune = 'on'`.execute(trx)
        await expect(sql`update audit_events set decision = 'denied'`.execute(trx)).rejects.toThrow(
          /append-only/,
        )
      })
      await expect(
        db.transaction().execute(async (trx) => {
          await sql`set local coffer.audit_prune = 'on'`.execute(trx)
          const deleted = await sql`delete from audit_events`.execute(trx)
          expect(Number(deleted.numAffectedRows)).toBe(before)
          throw new Error('roll back')
        }),
      ).rejects.toThrow('roll back')
      const after = Number(
        (await sql<{ n: string }>`select count(*) as n from audit_events`.execute(db)).rows[0]?.n,
      )
      expect(after).toBeGreaterThanOrEqual(before)
    })
  },
)
