import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildTestApp, type TestApp } from '../helpers/app.js'

/**
 * Finding 14 of the security review, as a property: random text (any UTF-16 code units, lone
 * surrogates included), random numbers (Infinity, NaN, -0, huge) and random JSON thrown at a
 * handful of routes in every encoding never answer 5xx. INPUT_PROPERTY_RUNS overrides the number
 * of cases per route (default 100).
 */
const RUNS = Number(process.env.INPUT_PROPERTY_RUNS ?? 100)

/** Any text: `binary` string units include unpaired surrogates. */
const anyText = fc.string({ unit: 'binary', maxLength: 40 })
const anyNumber = fc.oneof(
  fc.double(),
  fc.constantFrom(
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    Number.NaN,
    -0,
    Number.MAX_VALUE,
  ),
  fc.bigInt().map((n) => Number(n)),
)
/** A query or form value as text: numbers spelled every way a client might. */
const anyParam = fc.oneof(
  anyText,
  anyNumber.map(String),
  fc.constantFrom('Infinity', '-Infinity', 'NaN', '1e400', '9007199254740993', '%ED%A0%80'),
)
/** A JSON body: raw text, so that 1e400 and lone-surrogate escapes reach the parser as clients send them. */
const anyJsonText = fc.oneof(
  fc.jsonValue().map((v) => JSON.stringify(v)),
  anyText.map((s) => JSON.stringify({ name: s, issuer: s, document: { s } })),
  anyNumber.map((n) => `{"name":${String(n)},"page":${String(n)},"document":{"n":${String(n)}}}`),
  fc.constantFrom(
    '{"name":"\\ud800"}',
    '{"document":{"\\udc00":1}}',
    '{"issuer":"a\\ud800"}',
    '{"page":1e400,"document":{"n":-1e400}}',
  ),
)

const wellFormed = (s: string) => (s as string & { toWellFormed(): string }).toWellFormed()

describe('no client input answers 5xx (property)', () => {
  let t: TestApp
  let vault: string
  let authorization: string

  beforeAll(async () => {
    t = await buildTestApp()
    authorization = `Basic ${Buffer.from(`${t.admin.api_key}:`).toString('base64')}`
    vault = (await t.api.post('/v1/vaults', { auth: t.admin.api_key, form: { name: 'v' } })).json()
      .vault.id as string
  })
  afterAll(async () => {
    await t?.close()
  })

  const notServerError = (res: LightMyRequestResponse, what: string) => {
    expect(res.statusCode, `${what}: ${res.body}`).toBeLessThan(500)
  }
  const jsonRoutes = () => [
    ['POST', '/v1/vaults'],
    ['POST', `/v2/vaults/${vault}/documents`],
    ['POST', `/v1/users/${t.admin.userId}/mfa/start_enrollment`],
    ['POST', `/v1/vaults/${vault}/search`],
  ]
  const listRoutes = () => [
    '/v1/vaults',
    `/v1/vaults/${vault}/documents`,
    `/v1/vaults/${vault}/blobs`,
    '/v1/scoped_access_tokens',
  ]

  it('JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...jsonRoutes()),
        anyJsonText,
        async ([method, url], body) => {
          const res = await t.app.inject({
            method: method as 'POST',
            url: url as string,
            headers: { authorization, 'content-type': 'application/json' },
            payload: body,
          })
          notServerError(res, `${method} ${url} ${body}`)
        },
      ),
      { numRuns: RUNS },
    )
  })

  it('query strings of list routes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...listRoutes()),
        fc.constantFrom('page', 'per_page', 'full'),
        anyParam,
        async (url, name, value) => {
          // A URL carries UTF-8 bytes: an unpaired surrogate cannot be sent there (it arrives as
          // U+FFFD); the raw escapes of `anyParam` cover undecodable bytes.
          const query = `${name}=${encodeURIComponent(wellFormed(value))}`
          const res = await t.app.inject({
            method: 'GET',
            url: `${url}?${query}`,
            headers: { authorization },
          })
          notServerError(res, `GET ${url}?${query}`)
        },
      ),
      { numRuns: RUNS },
    )
  })

  it('urlencoded and multipart form fields', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('form', 'multipart'),
        fc.dictionary(fc.constantFrom('name', 'document', 'schema_id', 'page'), anyParam),
        async (encoding, fields) => {
          const res = await t.api.post(`/v1/vaults/${vault}/documents`, {
            auth: t.admin.api_key,
            [encoding]: fields,
          })
          notServerError(res, `${encoding} ${JSON.stringify(fields)}`)
        },
      ),
      { numRuns: RUNS },
    )
  })
})
