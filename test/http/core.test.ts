import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { buildApp } from '../../src/app.js'
import { b64, buildTestApp, errorOf, type TestApp } from '../helpers/app.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

describe('HTTP core', () => {
  let t: TestApp
  beforeAll(async () => {
    t = await buildTestApp()
  })
  afterAll(() => t.close())

  it('wraps every success in the envelope with a fresh transaction id', async () => {
    const a = await t.api.get('/v1/groups', { auth: t.admin.api_key })
    const b = await t.api.get('/v1/groups', { auth: t.admin.api_key })
    expect(a.json().result).toBe('success')
    expect(a.json().transaction_id).toMatch(UUID)
    expect(a.json().transaction_id).not.toBe(b.json().transaction_id)
    expect(a.headers['content-type']).toBe('application/json')
    expect(a.headers['cache-control']).toBe('no-store')
    expect(a.headers['x-powered-by']).toBeUndefined()
  })

  it('answers unknown routes with a 404 envelope', async () => {
    const res = await t.api.get('/v1/nothing-here?secret=1')
    expect(res.statusCode).toBe(404)
    expect(errorOf(res)).toEqual({
      message: 'No route for GET /v1/nothing-here',
      type: 'not_found_error',
      code: 'ROUTE_NOT_FOUND',
    })
  })

  it('accepts the encodings real clients send', async () => {
    const auth = t.admin.api_key
    const urlencoded = await t.api.post('/v1/groups', { auth, form: { name: 'enc-form' } })
    const multipart = await t.api.post('/v1/groups', {
      auth,
      multipart: { name: 'enc-multipart', policy: b64([]) },
    })
    const query = await t.api.post('/v1/groups?name=enc-query&policy=&user_ids=', { auth })
    const json = await t.api.post('/v1/groups', { auth, json: { name: 'enc-json' } })
    for (const res of [urlencoded, multipart, query, json]) expect(res.statusCode).toBe(200)
    expect(query.json().group).toMatchObject({ name: 'enc-query', policy: [], user_ids: [] })
    // Body fields win over query parameters; unknown parameters and empty query segments are ignored.
    const both = await t.api.post('/v1/groups?&name=from-query&_tv_sdk=1.3.1', {
      auth,
      form: { name: 'from-body' },
    })
    expect(both.json().group.name).toBe('from-body')
  })

  it('takes an empty body with a JSON content type as no body', async () => {
    const created = await t.api.post('/v1/groups', {
      auth: t.admin.api_key,
      form: { name: 'empty-json' },
    })
    const id = created.json().group.id
    const res = await t.api.delete(`/v1/groups/${id}`, {
      auth: t.admin.api_key,
      headers: { 'content-type': 'application/json' },
    })
    expect(res.statusCode).toBe(200)
    const list = await t.api.get('/v1/groups', {
      auth: t.admin.api_key,
      headers: { 'content-type': 'application/json' },
    })
    expect(list.statusCode).toBe(200)
  })

  it('rejects malformed JSON, unknown media types and oversized bodies in the envelope', async () => {
    const auth = t.admin.api_key
    const empty = await t.api.post('/v1/groups', {
      auth,
      headers: { 'content-type': 'application/json' },
    })
    expect(empty.statusCode).toBe(400)
    expect(errorOf(empty).message).toBe('name is required')
    const malformed = await t.app.inject({
      method: 'PUT',
      url: `/v1/groups/${crypto.randomUUID()}`,
      headers: {
        authorization: `Basic ${Buffer.from(`${auth}:`).toString('base64')}`,
        'content-type': 'application/json',
      },
      payload: '{"name": ',
    })
    expect(malformed.statusCode).toBe(400)
    expect(errorOf(malformed)).toMatchObject({
      message: 'Request body must be valid JSON',
      code: 'INVALID_JSON',
    })
    const xml = await t.app.inject({
      method: 'POST',
      url: '/v1/groups',
      headers: {
        authorization: `Basic ${Buffer.from(`${auth}:`).toString('base64')}`,
        'content-type': 'application/xml',
      },
      payload: '<group/>',
    })
    expect(xml.statusCode).toBe(415)
    expect(errorOf(xml).code).toBe('UNSUPPORTED_MEDIA_TYPE')
    const huge = await t.api.post('/v1/groups', { auth, form: { name: 'x'.repeat(2_000_000) } })
    expect(huge.statusCode).toBe(413)
    expect(errorOf(huge).code).toBe('PAYLOAD_TOO_LARGE')
  })

  it('names the field of a validation error', async () => {
    const res = await t.api.get('/v1/groups/not-a-uuid', { auth: t.admin.api_key })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res)).toMatchObject({
      type: 'invalid_request_error',
      code: 'INVALID_PARAMETER',
      message: 'group_id must be a valid UUID',
    })
    const membership = await t.api.post(`/v1/groups/${crypto.randomUUID()}/membership`, {
      auth: t.admin.api_key,
      json: {},
    })
    expect(errorOf(membership).message).toBe('user_ids is required')
  })

  it('hides the cause of a server error', async () => {
    const spy = vi
      .spyOn(t.deps.groups, 'list')
      .mockRejectedValueOnce(new Error('SQLITE_CORRUPT: table groups /var/lib/secret'))
    const res = await t.api.get('/v1/groups', { auth: t.admin.api_key })
    expect(res.statusCode).toBe(500)
    expect(errorOf(res)).toEqual({
      message: 'Internal server error',
      type: 'api_error',
      code: 'INTERNAL',
    })
    expect(res.body).not.toMatch(/SQLITE|secret/)
    spy.mockRestore()
  })

  it('serves OpenAPI 3.1 built from the route schemas, and a docs page', async () => {
    const res = await t.api.get('/openapi.json')
    expect(res.statusCode).toBe(200)
    const doc = res.json()
    expect(doc.openapi).toBe('3.1.0')
    expect(doc.result).toBeUndefined()
    for (const path of [
      '/v1/auth/login',
      '/v1/users',
      '/v2/users/{user_ids}',
      '/v1/groups/{group_id}/membership',
    ]) {
      expect(Object.keys(doc.paths)).toContain(path)
    }
    expect(doc.paths['/v1/users'].post.requestBody).toBeDefined()
    const docs = await t.api.get('/docs/')
    expect(docs.statusCode).toBe(200)
    expect(docs.headers['content-type']).toMatch(/text\/html/)
  })

  it('refuses to register a route that declares no access rule', async () => {
    const app = await buildApp(t.deps)
    expect(() => app.get('/v1/unguarded', async () => ({}))).toThrow(/declares no access rule/)
    await app.close()
  })
})
