import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, buildTestApp, createUser, errorOf, type TestApp } from '../helpers/app.js'

/**
 * `GET /v1/audit_events` (issue 13): the caller's own account's events, newest first, with
 * filters and pages; policy resource `Audit::` (R), held by the bootstrap admin group; API keys
 * and access tokens only.
 */
let t: TestApp
let vaultId: string
let docId: string
beforeAll(async () => {
  t = await buildTestApp()
  const auth = t.admin.api_key
  vaultId = (await t.api.post('/v1/vaults', { auth, form: { name: 'api' } })).json().vault.id
  docId = (
    await t.api.post(`/v1/vaults/${vaultId}/documents`, { auth, form: { document: b64({ a: 1 }) } })
  ).json().document_id
  await t.api.get(`/v1/vaults/${vaultId}/documents/${docId}`, { auth })
  await t.api.get('/v1/vaults', { auth: 'wrong-key' })
})
afterAll(() => t.close())

const list = (query: Record<string, string>, auth = t.admin.api_key) =>
  t.api.get('/v1/audit_events', { auth, query })

describe('GET /v1/audit_events', () => {
  it('lists the account’s events newest first, filtered by operation, resource, decision, actor and time', async () => {
    const all = await list({})
    expect(all.statusCode, all.body).toBe(200)
    const items = all.json().data.items as Array<{ seq: number; account_id: string }>
    expect(items.length).toBeGreaterThanOrEqual(4)
    expect(items.map((e) => e.seq)).toEqual([...items.map((e) => e.seq)].sort((a, b) => b - a))
    expect(items.every((e) => e.account_id === t.admin.account_id)).toBe(true)

    const reads = (await list({ operation: 'document.read' })).json().data.items
    expect(reads).toHaveLength(1)
    expect(reads[0]).toMatchObject({
      operation: 'document.read',
      actor_user_id: t.admin.userId,
      resources: { vault: [vaultId], document: [docId] },
      decision: 'allowed',
    })
    const byDoc = (await list({ resource_id: docId })).json().data.items
    expect(byDoc.map((e: { operation: string }) => e.operation).sort()).toEqual([
      'document.create',
      'document.read',
    ])
    expect((await list({ actor_user_id: t.admin.userId })).json().data.total).toBeGreaterThan(2)
    expect((await list({ decision: 'denied' })).json().data.total).toBe(0)
    expect((await list({ route: '/v1/vaults' })).json().data.items[0].route).toBe('/v1/vaults')
    const future = await list({ from: '2999-01-01T00:00:00Z' })
    expect(future.json().data).toMatchObject({ items: [], total: 0 })
    const past = await list({ to: '2000-01-01T00:00:00Z' })
    expect(past.json().data.total).toBe(0)
  })

  it('pages', async () => {
    // Each list is audited too: pages are taken up to a fixed time, so they hold still.
    const to = new Date().toISOString()
    const total = (await list({ to })).json().data.total
    const p1 = (await list({ to, per_page: '2', page: '1' })).json().data
    const p2 = (await list({ to, per_page: '2', page: '2' })).json().data
    expect(p1).toMatchObject({ page: 1, per_page: 2, total })
    expect(p1.items).toHaveLength(2)
    expect(p2.items[0].seq).toBe(p1.items[1].seq - 1)
  })

  it('shows only the caller’s own account', async () => {
    const other = await t.newAccount()
    const res = await list({}, other.api_key)
    expect(res.statusCode).toBe(200)
    const items = res.json().data.items as Array<{ account_id: string }>
    expect(items.every((e) => e.account_id === other.account_id)).toBe(true)
    expect((await list({ resource_id: docId }, other.api_key)).json().data.total).toBe(0)
  })

  it('needs Audit:: with R; a SAT is refused; bad filters are 400 naming the field', async () => {
    const plain = await createUser(t, {
      policy: [{ Resources: ['Vault::.*'], Activities: 'R' }],
    })
    expect((await list({}, plain.apiKey)).statusCode).toBe(401)
    const auditor = await createUser(t, { policy: [{ Resources: ['Audit::'], Activities: 'R' }] })
    expect((await list({}, auditor.apiKey)).statusCode).toBe(200)
    const writeOnly = await createUser(t, {
      policy: [{ Resources: ['Audit::'], Activities: 'C' }],
    })
    expect((await list({}, writeOnly.apiKey)).statusCode).toBe(401)

    const sat = await t.api.post('/v1/scoped_access_tokens', {
      auth: t.admin.api_key,
      json: {
        name: 'aud',
        not_valid_after: new Date(Date.now() + 3_600_000).toISOString(),
        policy: [{ Resources: ['Audit::'], Activities: 'R' }],
      },
    })
    expect(sat.statusCode, sat.body).toBe(200)
    const bySat = await t.api.get('/v1/audit_events', {
      basic: sat.json().scoped_access_token.http_auth,
    })
    expect(bySat.statusCode).toBe(401)

    const bad = await list({ decision: 'maybe' })
    expect(bad.statusCode).toBe(400)
    expect(errorOf(bad).message).toMatch(/decision/)
    const badTime = await list({ from: 'yesterday' })
    expect(badTime.statusCode).toBe(400)
    expect(errorOf(badTime).message).toMatch(/from/)
    expect((await list({ per_page: '501' })).statusCode).toBe(400)
  })
})
