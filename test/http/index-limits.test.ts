import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_ROWS_PER_DOCUMENT, MAX_VALUES_PER_FIELD } from '../../src/indexing/index-values.js'
import { b64, buildTestApp, errorOf, type TestApp } from '../helpers/app.js'

/**
 * Index amplification (security review, finding 4): one document (or user) makes at most
 * MAX_VALUES_PER_FIELD index rows per field and MAX_ROWS_PER_DOCUMENT in all; a write beyond is
 * a 400 naming the field, and nothing of it is stored.
 */
const FIELDS = Array.from({ length: 11 }, (_, i) => ({
  name: `f${i}`,
  type: 'string',
  index: true,
}))

describe('index limits per document', () => {
  let t: TestApp
  let admin: string
  let vault: string
  let schema: string

  beforeAll(async () => {
    t = await buildTestApp()
    admin = t.admin.api_key
    const v = await t.api.post('/v1/vaults', { auth: admin, form: { name: `v-${randomUUID()}` } })
    vault = v.json().vault.id
    const s = await t.api.post(`/v1/vaults/${vault}/schemas`, {
      auth: admin,
      form: { schema: b64({ name: 'wide', fields: FIELDS }) },
    })
    expect(s.statusCode, s.body).toBe(200)
    schema = s.json().schema.id
  })
  afterAll(() => t?.close())

  const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`)
  const create = (content: unknown) =>
    t.api.post(`/v1/vaults/${vault}/documents`, {
      auth: admin,
      form: { document: b64(content), schema_id: schema },
    })
  const indexRows = async () =>
    (
      await t.deps.store.db
        .selectFrom('search_index')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('account_id', '=', t.admin.account_id)
        .where('schema_id', '=', schema)
        .executeTakeFirstOrThrow()
    ).n
  const expect400 = (res: Awaited<ReturnType<typeof create>>, message: RegExp) => {
    expect(res.statusCode, res.body).toBe(400)
    expect(errorOf(res)).toMatchObject({ code: 'INVALID_PARAMETER' })
    expect(errorOf(res).message).toMatch(message)
  }

  it(`indexes ${MAX_VALUES_PER_FIELD} values of one field; one more is a 400 naming it`, async () => {
    const before = Number(await indexRows())
    const ok = await create({ f0: values(MAX_VALUES_PER_FIELD) })
    expect(ok.statusCode, ok.body).toBe(200)
    expect(Number(await indexRows())).toBe(before + MAX_VALUES_PER_FIELD)
    const over = await create({ f0: 'x', f3: values(MAX_VALUES_PER_FIELD + 1) })
    expect400(over, /^document\.f3 has more than 1000 values to index/)
    expect(Number(await indexRows())).toBe(before + MAX_VALUES_PER_FIELD)
    // An update is held to the same limit.
    const id = ok.json().document_id
    const update = await t.api.put(`/v1/vaults/${vault}/documents/${id}`, {
      auth: admin,
      form: { document: b64({ f1: values(MAX_VALUES_PER_FIELD + 1) }) },
    })
    expect400(update, /^document\.f1 has more than 1000 values/)
  })

  it(`indexes ${MAX_ROWS_PER_DOCUMENT} values in all; one more is a 400 naming the field`, async () => {
    const full = Object.fromEntries(
      FIELDS.slice(0, 10).map((f) => [f.name, values(MAX_VALUES_PER_FIELD)]),
    )
    const ok = await create(full)
    expect(ok.statusCode, ok.body).toBe(200)
    const over = await create({ ...full, f10: 'one more' })
    expect400(over, /^document\.f10 brings the document over 10000 indexed values/)
  })

  it('holds user attributes under the user schema to the same limits', async () => {
    const us = await t.api.put(`/v1/accounts/${t.admin.account_id}/user_schema`, {
      auth: admin,
      form: { schema: b64({ name: 'user_schema', fields: [FIELDS[0]] }) },
    })
    expect(us.statusCode, us.body).toBe(200)
    const user = (n: number) =>
      t.api.post('/v1/users', {
        auth: admin,
        form: { username: `u-${randomUUID()}`, attributes: b64({ f0: values(n) }) },
      })
    expect((await user(MAX_VALUES_PER_FIELD)).statusCode).toBe(200)
    expect400(await user(MAX_VALUES_PER_FIELD + 1), /^attributes\.f0 has more than 1000 values/)
  })
})
