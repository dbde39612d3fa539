import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { b64, buildTestApp, errorOf, type TestApp } from '../helpers/app.js'
import { buildConsentTestApp, CONSENT, type ConsentTestApp } from '../helpers/consent.js'

/**
 * Finding 14 of the security review: client input answered 500. `page=Infinity` reached SQL
 * ("datatype mismatch") and an unpaired surrogate in the MFA issuer threw in encodeURIComponent.
 * Every text input must be well-formed Unicode and every number finite, on every route (one hook,
 * http/input-guard.ts, plus the base64 JSON decoder), answered 400 naming the field.
 */

const LONE = '\ud800'
const ILL_FORMED = /must be well-formed Unicode text/

/** A 400 error envelope whose message starts with the field's name. */
function expectFieldError(res: LightMyRequestResponse, field: string, problem?: RegExp) {
  expect(res.statusCode, res.body).toBe(400)
  const error = errorOf(res)
  expect(error.message.startsWith(`${field} `), error.message).toBe(true)
  if (problem) expect(error.message).toMatch(problem)
}

describe('numbers and text from clients never cause a 5xx', () => {
  let t: TestApp
  let vault: string
  let schema: string
  const auth = () => t.admin.api_key

  beforeAll(async () => {
    t = await buildTestApp()
    vault = (await t.api.post('/v1/vaults', { auth: auth(), form: { name: 'v' } })).json().vault
      .id as string
    const created = await t.api.post(`/v1/vaults/${vault}/schemas`, {
      auth: auth(),
      form: { schema: b64({ name: 'notes', fields: [{ name: 'note', type: 'string' }] }) },
    })
    schema = created.json().schema.id as string
  })
  afterAll(async () => {
    await t?.close()
  })

  describe('list pagination: page from 1 to 1,000,000, per_page from 1 to 500', () => {
    const lists = () => [
      '/v1/vaults',
      `/v1/accounts/${t.admin.account_id}/vaults`,
      `/v1/vaults/${vault}/documents`,
      `/v1/vaults/${vault}/schemas/${schema}/documents`,
      `/v1/vaults/${vault}/blobs`,
      '/v1/scoped_access_tokens',
    ]
    const refused = [
      'Infinity',
      '-Infinity',
      'NaN',
      '1e400',
      '-1e400',
      '9007199254740993',
      '99999999999999999999999',
      '-1',
      '0',
      '1.5',
      '',
      'abc',
    ]

    it.each(['page', 'per_page'])(
      '%s: every non-number, non-finite or out-of-range value is a 400 naming it',
      async (field) => {
        for (const url of lists()) {
          for (const value of refused) {
            const res = await t.api.get(`${url}?${field}=${encodeURIComponent(value)}`, {
              auth: auth(),
            })
            expectFieldError(res, field)
          }
        }
      },
    )

    it('the limits themselves are accepted and one beyond is refused', async () => {
      for (const url of lists()) {
        for (const ok of ['page=1', 'page=1000000', 'per_page=1', 'per_page=500']) {
          const res = await t.api.get(`${url}?${ok}`, { auth: auth() })
          expect(res.statusCode, `${url}?${ok}: ${res.body}`).toBe(200)
        }
        expectFieldError(await t.api.get(`${url}?page=1000001`, { auth: auth() }), 'page')
        expectFieldError(await t.api.get(`${url}?per_page=501`, { auth: auth() }), 'per_page')
      }
    })

    it('unpaginated lists (users, schemas, groups) ignore page and per_page, never 5xx', async () => {
      for (const url of ['/v1/users', `/v1/vaults/${vault}/schemas`, '/v1/groups']) {
        for (const value of refused) {
          for (const field of ['page', 'per_page']) {
            const res = await t.api.get(`${url}?${field}=${encodeURIComponent(value)}`, {
              auth: auth(),
            })
            expect(res.statusCode, `${url}?${field}=${value}: ${res.body}`).toBe(200)
          }
        }
      }
    })

    it('search pages: 1e400 in the JSON or base64 search option is a 400 naming it', async () => {
      const option = `{"schema_id":"${schema}","filter":{"note":{"type":"eq","value":"x"}},"page":1e400}`
      const json = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${vault}/search`,
        headers: {
          authorization: `Basic ${Buffer.from(`${auth()}:`).toString('base64')}`,
          'content-type': 'application/json',
        },
        payload: `{"search_option":${option}}`,
      })
      expectFieldError(json, 'search_option.page')
      const form = await t.api.post(`/v1/vaults/${vault}/search`, {
        auth: auth(),
        form: { search_option: Buffer.from(option).toString('base64') },
      })
      expectFieldError(form, 'search_option.page', /finite/)
    })
  })

  describe('unpaired surrogates', () => {
    it('the MFA issuer: 400 naming issuer (was a 500 URIError)', async () => {
      const res = await t.api.post(`/v1/users/${t.admin.userId}/mfa/start_enrollment`, {
        auth: auth(),
        json: { issuer: `Acme${LONE}` },
      })
      expectFieldError(res, 'issuer', ILL_FORMED)
    })

    it('a JSON body, at any depth and in a name: 400 naming the path', async () => {
      expectFieldError(
        await t.api.post('/v1/vaults', { auth: auth(), json: { name: `v${LONE}` } }),
        'name',
        ILL_FORMED,
      )
      const nested = await t.api.post(`/v2/vaults/${vault}/documents`, {
        auth: auth(),
        json: { document: { a: [{ ok: 'fine' }, { b: `x${LONE}y` }] } },
      })
      expectFieldError(nested, 'document.a.1.b', ILL_FORMED)
      const name = await t.api.post(`/v2/vaults/${vault}/documents`, {
        auth: auth(),
        json: { document: { [`k${LONE}`]: 1 } },
      })
      expectFieldError(name, 'document."k\\ud800"', /name must be well-formed/)
    })

    it('base64 JSON (v1 document, attributes) in urlencoded and multipart forms', async () => {
      const doc = b64({ note: { deep: `n${LONE}` } })
      for (const encoding of ['form', 'multipart'] as const) {
        const res = await t.api.post(`/v1/vaults/${vault}/documents`, {
          auth: auth(),
          [encoding]: { document: doc },
        })
        expectFieldError(res, 'document.note.deep', ILL_FORMED)
      }
      const user = await t.api.post('/v1/users', {
        auth: auth(),
        form: { username: 'surrogate-user', attributes: b64({ name: LONE }) },
      })
      expectFieldError(user, 'attributes.name', ILL_FORMED)
    })

    it('base64 of bytes that are not UTF-8 is refused, not silently replaced', async () => {
      const bytes = Buffer.concat([
        Buffer.from('{"note":"'),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from('"}'),
      ])
      const res = await t.api.post(`/v1/vaults/${vault}/documents`, {
        auth: auth(),
        form: { document: bytes.toString('base64') },
      })
      expectFieldError(res, 'document', /UTF-8/)
    })

    it('a non-finite number in base64 JSON: 400 naming the path', async () => {
      const res = await t.api.post(`/v1/vaults/${vault}/documents`, {
        auth: auth(),
        form: { document: Buffer.from('{"n":[1,-1e400]}').toString('base64') },
      })
      expectFieldError(res, 'document.n.1', /finite/)
    })

    it('percent-escaped surrogates in a query string or urlencoded body stay literal text', async () => {
      // The query parser leaves an escape that is not UTF-8 undecoded: no surrogate can arise.
      const form = await t.app.inject({
        method: 'POST',
        url: '/v1/vaults?name=q%ED%A0%80',
        headers: {
          authorization: `Basic ${Buffer.from(`${auth()}:`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: 'name=f%ED%A0%80',
      })
      expect(form.statusCode, form.body).toBe(200)
      expect(form.json().vault.name).toBe('f%ED%A0%80')
      const query = await t.api.get('/v1/vaults?full=%ED%A0%80&page=%ED%A0%80', { auth: auth() })
      expectFieldError(query, 'page')
    })

    it('multipart bytes that are not UTF-8 become U+FFFD in a field, never a surrogate', async () => {
      const boundary = 'coffer-guard-boundary'
      const payload = Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nm`),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ])
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/vaults',
        headers: {
          authorization: `Basic ${Buffer.from(`${auth()}:`).toString('base64')}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
        },
        payload,
      })
      expect(res.statusCode, res.body).toBe(200)
      const name = res.json().vault.name as string
      expect((name as string & { isWellFormed(): boolean }).isWellFormed()).toBe(true)
    })

    it('a BLOB filename with an escaped surrogate is never a 5xx, and reads back', async () => {
      const boundary = 'coffer-guard-blob'
      const payload = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''a%ED%A0%80.txt\r\n` +
          `Content-Type: text/plain\r\n\r\nhello\r\n--${boundary}--\r\n`,
      )
      const res = await t.app.inject({
        method: 'POST',
        url: `/v1/vaults/${vault}/blobs`,
        headers: {
          authorization: `Basic ${Buffer.from(`${auth()}:`).toString('base64')}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
        },
        payload,
      })
      expect(res.statusCode, res.body).toBeLessThan(500)
      if (res.statusCode === 200) {
        const id = res.json().blob_id as string
        const got = await t.api.get(`/v1/vaults/${vault}/blobs/${id}`, { auth: auth() })
        expect(got.statusCode, got.body).toBe(200)
      }
    })
  })
})

describe('the consent API refuses ill-formed text too (in its own error shape)', () => {
  let c: ConsentTestApp
  beforeAll(async () => {
    c = await buildConsentTestApp()
  })
  afterAll(async () => {
    await c?.close()
  })

  it('an unpaired surrogate in the JSON body: 400 naming the field', async () => {
    const res = await c.post({ jwt: `x${LONE}`, consentAnalytics: true })
    expect(res.statusCode, res.body).toBe(400)
    expect(res.json().error).toMatch(/^jwt must be well-formed Unicode text/)
  })

  it('a non-UTF-8 escape in the query string is never a 5xx', async () => {
    const res = await c.app.inject({ method: 'GET', url: `${CONSENT}?shop=%ED%A0%80` })
    expect(res.statusCode, res.body).toBeLessThan(500)
  })
})
