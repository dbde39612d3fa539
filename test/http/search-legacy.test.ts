import { randomUUID } from 'node:crypto'
import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SchemaField } from '../../src/indexing/index-values.js'
import { MAX_SORT_KEYS } from '../../src/modules/search/search-options.js'
import { b64, basicHeader, createUser } from '../helpers/app.js'
import { insertDocument, insertSchema, type TestSchema } from '../helpers/search-fixtures.js'
import { startTestServer, type TestServer } from '../helpers/server.js'

/**
 * The legacy search spellings of TrueVault clients (issue 11, item 4; docs/truevault-clients.md
 * §3), sent over a real socket exactly as those clients send them: `search_option` in the query
 * string of a GET on the vault's path (with and without the trailing slash), as a urlencoded body
 * on that GET, and as a form POSTed to the trailing-slash path. Each must answer what `POST
 * /v1/vaults/{id}/search` answers, success or refusal.
 */
const FIELDS: SchemaField[] = [
  { name: 'name', type: 'string', index: true },
  { name: 'age', type: 'integer', index: true },
]

interface Answer {
  status: number
  body: Record<string, unknown>
}

/** One HTTP exchange with node:http (fetch refuses a GET with a body; these clients do not). */
function send(
  server: TestServer,
  method: string,
  path: string,
  o: { auth?: string; form?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...(o.headers ?? {}) }
    if (o.auth) headers.authorization = basicHeader(o.auth)
    if (o.form !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      headers['content-length'] = Buffer.byteLength(o.form)
    }
    const req = request(`${server.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {} })
      })
    })
    req.on('error', reject)
    req.end(o.form)
  })
}

const optionQuery = (option: unknown) =>
  new URLSearchParams({ search_option: b64(option) }).toString()

/** The answer without its per-request transaction id. */
const comparable = ({ status, body }: Answer) => {
  const { transaction_id, ...rest } = body
  expect(typeof transaction_id).toBe('string')
  return { status, ...rest }
}

describe('legacy vault search routes', () => {
  let server: TestServer
  let admin: string
  let vault: string
  let schema: TestSchema
  let reader: string
  let noSearch: string

  /** An option matching every document. */
  const everyone = () => ({
    schema_id: schema.id,
    filter: { age: { type: 'range', value: { gte: 0 } } },
  })

  /** The regular route, as the SDK sends it. */
  const regular = (option: unknown, auth = admin) =>
    send(server, 'POST', `/v1/vaults/${vault}/search`, { auth, form: optionQuery(option) })

  /** Every legacy spelling of the same search. */
  const legacy = (option: unknown, auth = admin): Record<string, () => Promise<Answer>> => ({
    'GET /v1/vaults/{id}/?search_option=': () =>
      send(server, 'GET', `/v1/vaults/${vault}/?${optionQuery(option)}`, { auth }),
    'GET /v1/vaults/{id}?search_option=': () =>
      send(server, 'GET', `/v1/vaults/${vault}?${optionQuery(option)}`, { auth }),
    'GET /v1/vaults/{id}/ with a form body': () =>
      send(server, 'GET', `/v1/vaults/${vault}/`, { auth, form: optionQuery(option) }),
    'GET /v1/vaults/{id} with a form body': () =>
      send(server, 'GET', `/v1/vaults/${vault}`, { auth, form: optionQuery(option) }),
    'POST /v1/vaults/{id}/ with a form body': () =>
      send(server, 'POST', `/v1/vaults/${vault}/`, { auth, form: optionQuery(option) }),
  })

  /** Each legacy spelling answers exactly what the regular route answers. */
  async function expectSameAsRegular(option: unknown, auth = admin): Promise<Answer> {
    const expected = await regular(option, auth)
    for (const [name, call] of Object.entries(legacy(option, auth))) {
      expect(comparable(await call()), name).toEqual(comparable(expected))
    }
    return expected
  }

  beforeAll(async () => {
    server = await startTestServer()
    const t = server.testApp
    admin = server.admin.api_key
    const v = await t.api.post('/v1/vaults', { auth: admin, form: { name: `v-${randomUUID()}` } })
    vault = v.json().vault.id
    schema = await insertSchema(t, server.admin.account_id, vault, FIELDS)
    for (const [name, age] of [
      ['alice', 30],
      ['bob', 25],
      ['carol', 35],
    ] as const)
      await insertDocument(t, {
        accountId: server.admin.account_id,
        vaultId: vault,
        schema,
        content: { name, age },
      })
    const docs = `Vault::${vault}::Document::.*`
    reader = (
      await createUser(t, {
        policy: [{ Resources: [docs, `Vault::${vault}::Search::`], Activities: 'R' }],
      })
    ).apiKey
    noSearch = (await createUser(t, { policy: [{ Resources: [docs], Activities: 'R' }] })).apiKey
  })
  afterAll(async () => {
    await server?.close()
  })

  it('answers each legacy spelling exactly as the search route (filter, sort, full documents)', async () => {
    const option = {
      schema_id: schema.id,
      filter: { age: { type: 'range', value: { gte: 26 } } },
      sort: [{ age: 'desc' }],
      full_document: true,
    }
    const answer = await expectSameAsRegular(option, reader)
    expect(answer.status).toBe(200)
    const data = answer.body.data as { documents: { document: string }[] }
    expect(
      data.documents.map((d) => JSON.parse(Buffer.from(d.document, 'base64').toString())),
    ).toEqual([
      { name: 'carol', age: 35 },
      { name: 'alice', age: 30 },
    ])
    const paged = await expectSameAsRegular({ ...everyone(), per_page: 2, page: 2 })
    expect(paged.body.data).toMatchObject({ info: { current_page: 2, total_result_count: 3 } })
  })

  it('refuses exactly as the search route: no Search grant 401, bad option 400', async () => {
    const option = everyone()
    expect((await expectSameAsRegular(option, noSearch)).status).toBe(401)
    // No credential at all, and a malformed vault id: the same answers too.
    expect((await expectSameAsRegular(option, '')).status).toBe(401)
    const real = vault
    vault = 'not-a-uuid'
    try {
      expect((await expectSameAsRegular(option)).status).toBe(400)
    } finally {
      vault = real
    }
    const tooManySortKeys = {
      ...everyone(),
      sort: Array.from({ length: MAX_SORT_KEYS + 1 }, () => ({ age: 'asc' })),
    }
    const refused = await expectSameAsRegular(tooManySortKeys)
    expect(refused.status).toBe(400)
    expect(JSON.stringify(refused.body)).toContain('sort')
    expect((await expectSameAsRegular({ filter: {} })).status).toBe(400)
    // Not base64 of JSON: the same 400 naming search_option on every spelling.
    const garbled = 'search_option=%25%25'
    const expected = await send(server, 'POST', `/v1/vaults/${vault}/search`, {
      auth: admin,
      form: garbled,
    })
    expect(expected.status).toBe(400)
    expect(JSON.stringify(expected.body)).toContain('search_option')
    for (const answer of [
      await send(server, 'GET', `/v1/vaults/${vault}/?${garbled}`, { auth: admin }),
      await send(server, 'GET', `/v1/vaults/${vault}?${garbled}`, { auth: admin }),
      await send(server, 'GET', `/v1/vaults/${vault}`, { auth: admin, form: garbled }),
      await send(server, 'POST', `/v1/vaults/${vault}/`, { auth: admin, form: garbled }),
    ])
      expect(comparable(answer)).toEqual(comparable(expected))
  })

  it('keeps the vault read: GET /v1/vaults/{id} without search_option reads the vault', async () => {
    const read = await send(server, 'GET', `/v1/vaults/${vault}`, { auth: admin })
    expect(read.status).toBe(200)
    expect(read.body.vault).toMatchObject({ id: vault })
    // Other query parameters, an empty JSON body (as the SDK sends on GET): still the read.
    const withQuery = await send(server, 'GET', `/v1/vaults/${vault}?page=1`, {
      auth: admin,
      headers: { 'content-type': 'application/json' },
    })
    expect(withQuery.body.vault).toMatchObject({ id: vault })
    // HEAD is never a search.
    const head = await send(server, 'HEAD', `/v1/vaults/${vault}?${optionQuery({})}`, {
      auth: admin,
    })
    expect(head.status).toBe(200)
    // The trailing-slash path has no meaning without a search option.
    expect((await send(server, 'GET', `/v1/vaults/${vault}/`, { auth: admin })).status).toBe(404)
    // Other paths under the vault are not searches even when they carry the parameter.
    const docs = await send(server, 'GET', `/v1/vaults/${vault}/documents?${optionQuery({})}`, {
      auth: admin,
    })
    expect(docs.status).toBe(200)
    expect(docs.body.data).toBeDefined()
  })

  it('a GET form body without search_option is a search without an option: 400 naming it', async () => {
    const res = await send(server, 'GET', `/v1/vaults/${vault}`, { auth: admin, form: 'a=1' })
    expect(res.status).toBe(400)
    expect(res.body).toMatchObject({
      result: 'error',
      error: { code: 'INVALID_PARAMETER', message: 'search_option is required' },
    })
  })

  it('bounds a chunked GET form body (no length announced) by the body limit: 413', async () => {
    const limit = server.testApp.app.initialConfig.bodyLimit as number
    const answer = await new Promise<Answer>((resolve, reject) => {
      const req = request(`${server.url}/v1/vaults/${vault}/`, {
        method: 'GET',
        headers: {
          authorization: basicHeader(admin),
          'content-type': 'application/x-www-form-urlencoded',
          'transfer-encoding': 'chunked',
        },
      })
      req.on('response', (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString()),
          }),
        )
      })
      req.on('error', reject)
      req.write(`${optionQuery(everyone())}&pad=`)
      // Written in pieces: the server must stop at the limit, not after buffering it all.
      const piece = 'x'.repeat(64 * 1024)
      for (let sent = 0; sent <= limit; sent += piece.length) req.write(piece)
      req.end()
    })
    expect(answer.status).toBe(413)
    expect(answer.body).toMatchObject({ result: 'error', error: { code: 'PAYLOAD_TOO_LARGE' } })
  })

  it('bounds a GET form body by the body limit: at the limit read, one byte beyond 413', async () => {
    const limit = server.testApp.app.initialConfig.bodyLimit as number
    const base = `${optionQuery(everyone())}&pad=`
    const atLimit = base + 'x'.repeat(limit - base.length)
    expect(Buffer.byteLength(atLimit)).toBe(limit)
    const ok = await send(server, 'GET', `/v1/vaults/${vault}/`, { auth: admin, form: atLimit })
    expect(ok.status).toBe(200)
    const beyond = await send(server, 'GET', `/v1/vaults/${vault}/`, {
      auth: admin,
      form: `${atLimit}x`,
    })
    expect(beyond.status).toBe(413)
    expect(beyond.body).toMatchObject({ result: 'error', error: { code: 'PAYLOAD_TOO_LARGE' } })
  })
})
