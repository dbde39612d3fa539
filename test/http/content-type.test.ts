import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, basicHeader, buildTestApp, type TestApp, unb64 } from '../helpers/app.js'
import {
  buildConsentTestApp,
  CONSENT,
  type ConsentTestApp,
  emailQuery,
} from '../helpers/consent.js'
import { headerValues, rawExchange } from '../helpers/raw-http.js'

/**
 * TrueVault answered JSON as exactly `application/json` (a PHP client decodes a body only then)
 * and the deprecated single-document read as `application/octet-stream` (Ruby clients decode
 * the base64 only then). Read from the header bytes on a real socket.
 */
async function listen(app: FastifyInstance): Promise<number> {
  await app.listen({ host: '127.0.0.1', port: 0 })
  return (app.server.address() as AddressInfo).port
}

const form = (fields: Record<string, string>) => ({
  headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
})

describe('main API: JSON answers are exactly application/json', () => {
  let t: TestApp
  let port: number
  let auth: Record<string, string>

  beforeAll(async () => {
    t = await buildTestApp()
    port = await listen(t.app)
    auth = { Authorization: basicHeader(t.admin.api_key) }
  })
  afterAll(() => t?.close())

  const cases: [string, string, string, () => Record<string, string>, string?][] = [
    ['a success', 'GET', '/v1/auth/me', () => auth],
    ['a missing credential (401)', 'GET', '/v1/auth/me', () => ({})],
    ['a route that does not exist (404)', 'GET', '/v1/nowhere', () => ({})],
    ['a validation error (400)', 'GET', '/v1/vaults/not-a-uuid', () => auth],
    ['a malformed URL (400)', 'GET', '/v1/vaults/%E0%A4%A', () => auth],
    [
      'a path parameter over the router limit (414)',
      'GET',
      `/v2/users/${'a'.repeat(9000)}`,
      () => auth,
    ],
    ['the OpenAPI document', 'GET', '/openapi.json', () => ({})],
    ['the documentation UI’s JSON', 'GET', '/docs/json', () => ({})],
  ]

  it.each(cases)('%s', async (_name, method, path, headers) => {
    const answer = await rawExchange(port, method, path, headers())
    expect(headerValues(answer, 'content-type'), answer.body).toEqual(['application/json'])
    expect(() => JSON.parse(answer.body)).not.toThrow()
  })

  it('a form POST that fails (400) and one that succeeds', async () => {
    const bad = form({ name: '' })
    const refused = await rawExchange(
      port,
      'POST',
      '/v1/vaults',
      { ...auth, ...bad.headers },
      bad.body,
    )
    expect(refused.status).toBe(400)
    expect(headerValues(refused, 'content-type')).toEqual(['application/json'])
    const good = form({ name: `v-${randomUUID()}` })
    const created = await rawExchange(
      port,
      'POST',
      '/v1/vaults',
      { ...auth, ...good.headers },
      good.body,
    )
    expect(created.status, created.body).toBe(200)
    expect(headerValues(created, 'content-type')).toEqual(['application/json'])
  })

  it('a BLOB keeps the exact type it was uploaded with, JSON with a charset included', async () => {
    const v = await t.api.post('/v1/vaults', {
      auth: t.admin.api_key,
      form: { name: `v-${randomUUID()}` },
    })
    const vault = v.json().vault.id
    for (const type of ['application/json; charset=utf-8', 'application/json']) {
      const up = await rawExchange(
        port,
        'POST',
        `/v1/vaults/${vault}/blobs?filename=a.json`,
        { ...auth, 'Content-Type': type },
        '{"a":1}',
      )
      expect(up.status, up.body).toBe(200)
      const id = JSON.parse(up.body).blob_id
      const down = await rawExchange(port, 'GET', `/v1/vaults/${vault}/blobs/${id}`, auth)
      expect(down.body).toBe('{"a":1}')
      expect(headerValues(down, 'content-type')).toEqual([type])
    }
  })

  describe('the deprecated single-document read', () => {
    let vault: string
    let docId: string
    const content = { name: 'Ada Lovelace', note: 'é ✓' }

    beforeAll(async () => {
      const v = await t.api.post('/v1/vaults', {
        auth: t.admin.api_key,
        form: { name: `v-${randomUUID()}` },
      })
      vault = v.json().vault.id
      const d = await t.api.post(`/v1/vaults/${vault}/documents`, {
        auth: t.admin.api_key,
        form: { document: b64(content) },
      })
      docId = d.json().document_id
    })

    it('answers the bare base64 text as application/octet-stream', async () => {
      const answer = await rawExchange(port, 'GET', `/v1/vaults/${vault}/documents/${docId}`, auth)
      expect(answer.status, answer.body).toBe(200)
      expect(headerValues(answer, 'content-type')).toEqual(['application/octet-stream'])
      expect(headerValues(answer, 'cache-control')).toEqual(['no-store'])
      expect(headerValues(answer, 'x-content-type-options')).toEqual(['nosniff'])
      expect(unb64(answer.body)).toEqual(content)
    })

    it('the same id twice (the array form) still answers JSON, as application/json', async () => {
      const answer = await rawExchange(
        port,
        'GET',
        `/v1/vaults/${vault}/documents/${docId},${docId}`,
        auth,
      )
      expect(answer.status, answer.body).toBe(200)
      expect(headerValues(answer, 'content-type')).toEqual(['application/json'])
      expect(JSON.parse(answer.body).documents).toHaveLength(1)
    })

    it('a refused single read is a JSON error, as application/json', async () => {
      const answer = await rawExchange(
        port,
        'GET',
        `/v1/vaults/${vault}/documents/${randomUUID()}`,
        auth,
      )
      expect(answer.status).toBe(404)
      expect(headerValues(answer, 'content-type')).toEqual(['application/json'])
      expect(JSON.parse(answer.body).result).toBe('error')
    })
  })
})

describe('consent API: JSON answers are exactly application/json', () => {
  let t: ConsentTestApp
  let port: number

  beforeAll(async () => {
    t = await buildConsentTestApp()
    port = await listen(t.app)
  })
  afterAll(() => t?.close())

  it('a record (200)', async () => {
    const query = new URLSearchParams(emailQuery(`c-${randomUUID()}@example.com`)).toString()
    const answer = await rawExchange(port, 'GET', `${CONSENT}?${query}`)
    expect(answer.status, answer.body).toBe(200)
    expect(headerValues(answer, 'content-type')).toEqual(['application/json'])
  })

  it.each([
    ['a refused request (400)', 'GET', CONSENT],
    ['a route that does not exist (404)', 'GET', '/nowhere'],
    ['a malformed URL (400)', 'GET', `${CONSENT}/%E0%A4%A`],
    ['a request line that does not parse (400)', 'GET', '/with space'],
  ])('%s', async (_name, method, path) => {
    const answer = await rawExchange(port, method, path)
    expect(answer.status).toBeGreaterThanOrEqual(400)
    expect(answer.status).toBeLessThan(500)
    expect(headerValues(answer, 'content-type'), answer.body).toEqual(['application/json'])
    expect(JSON.parse(answer.body)).toHaveProperty('error')
  })
})
