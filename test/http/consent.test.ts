import { createHmac } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  buildConsentTestApp,
  CONSENT,
  type ConsentTestApp,
  claimsOf,
  emailQuery,
  expectConsentError,
  recordOf,
  TEST_CONSENT_SECRET,
} from '../helpers/consent.js'

const V4 = '3b241101-e2bb-4255-8caf-4136c566a962'
let seq = 0
const uniqueEmail = () => `consumer-${++seq}-${Date.now().toString(36)}@example.com`

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
function handMadeToken(payload: object, secret = TEST_CONSENT_SECRET, alg = 'HS256') {
  const body = `${b64({ alg, typ: 'JWT' })}.${b64(payload)}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

describe('consent API', () => {
  let t: ConsentTestApp

  beforeAll(async () => {
    t = await buildConsentTestApp({ withMainApp: true })
  })
  afterAll(() => t.close())

  describe('GET /api/v1/cmp/consent', () => {
    it('creates an unknown consumer’s record: all null, implicit, not existing', async () => {
      const record = recordOf(await t.get(emailQuery(uniqueEmail())))
      expect(record).toMatchObject({
        consentAnalytics: null,
        consentAdvertising: null,
        consentPersonalization: null,
        consentTargetedAdvertising: null,
        optedOut: null,
        implicit: true,
        isExisting: false,
      })
    })

    it('hands out an HS256 token with the spec’s claims and no exp', async () => {
      const email = uniqueEmail()
      const { jwt } = recordOf(await t.get(emailQuery(email, 'tokens.example')))
      const header = JSON.parse(Buffer.from(jwt.split('.')[0] as string, 'base64url').toString())
      expect(header).toEqual({ alg: 'HS256', typ: 'JWT' })
      expect(claimsOf(jwt)).toEqual({
        consumerIdentifier: email,
        consumerPartition: 'tokens.example',
        iat: Math.floor(t.clock.now().getTime() / 1000),
      })
      const signature = createHmac('sha256', TEST_CONSENT_SECRET)
        .update(jwt.split('.').slice(0, 2).join('.'))
        .digest('base64url')
      expect(jwt.split('.')[2]).toBe(signature)
    })

    it('returns the existing record the second time, with its preferences', async () => {
      const q = emailQuery(uniqueEmail())
      const first = recordOf(await t.get(q))
      recordOf(await t.post({ jwt: first.jwt, consentAnalytics: true }))
      const again = recordOf(await t.get(q))
      expect(again).toMatchObject({ consentAnalytics: true, implicit: false, isExisting: true })
      expect(recordOf(await t.get(q)).isExisting).toBe(true)
    })

    it('knows an email consumer whatever the case or surrounding spaces', async () => {
      const email = uniqueEmail()
      const first = recordOf(await t.get(emailQuery(email)))
      recordOf(await t.post({ jwt: first.jwt, optedOut: true }))
      const upper = recordOf(await t.get(emailQuery(`  ${email.toUpperCase()} `)))
      expect(upper).toMatchObject({ optedOut: true, isExisting: true })
      expect(claimsOf(upper.jwt).consumerIdentifier).toBe(email)
    })

    it('keeps one record per shop: the same consumer elsewhere starts fresh', async () => {
      const email = uniqueEmail()
      const a = recordOf(await t.get(emailQuery(email, 'a.example')))
      recordOf(await t.post({ jwt: a.jwt, consentAdvertising: false }))
      const b = recordOf(await t.get(emailQuery(email, 'b.example')))
      expect(b).toMatchObject({ consentAdvertising: null, isExisting: false })
      expect(claimsOf(b.jwt).consumerPartition).toBe('b.example')
    })

    it('keys a storefront consumer on the logged-in customer id (no signature in development)', async () => {
      const q = {
        provider: 'storefront',
        shop: 'dev-shop.myshopify.com',
        privacy_center_id: 'pc',
        logged_in_customer_id: '4242',
      }
      const first = recordOf(await t.get(q))
      expect(first.isExisting).toBe(false)
      expect(claimsOf(first.jwt)).toMatchObject({
        consumerIdentifier: '4242',
        consumerPartition: 'dev-shop.myshopify.com',
      })
      recordOf(await t.post({ jwt: first.jwt, consentPersonalization: true }))
      const again = recordOf(await t.get({ ...q, signature: 'not checked in development' }))
      expect(again).toMatchObject({ consentPersonalization: true, isExisting: true })
    })

    it('answers 401 to a storefront request without a logged-in customer', async () => {
      const q = { provider: 'storefront', shop: 's.myshopify.com', privacy_center_id: 'pc' }
      const message = 'Customer must be logged in to access this endpoint'
      expectConsentError(await t.get(q), 401, message)
      expectConsentError(await t.get({ ...q, logged_in_customer_id: '' }), 401, message)
    })

    it('accepts a UUID v4 client_id in any case, and an empty one', async () => {
      recordOf(await t.get(emailQuery(uniqueEmail(), 'shop.example', { client_id: V4 })))
      recordOf(
        await t.get(emailQuery(uniqueEmail(), 'shop.example', { client_id: V4.toUpperCase() })),
      )
      recordOf(await t.get(emailQuery(uniqueEmail(), 'shop.example', { client_id: '' })))
    })

    it('ignores parameters it does not know and any Authorization header', async () => {
      const res = await t.get(
        emailQuery(uniqueEmail(), 'shop.example', { extra: '1', path_prefix: '/apps/x' }),
        {
          authorization: 'Basic Zm9vOg==',
        },
      )
      recordOf(res)
    })

    const long = 'x'.repeat(101)
    const base = {
      provider: 'email',
      shop: 'shop.example',
      privacy_center_id: 'pc',
      customer_email: 'a@b.co',
    }
    const cases: [string, Record<string, string> | string, number, string][] = [
      [
        'provider missing',
        { shop: 's', privacy_center_id: 'p' },
        400,
        'Provider parameter is required (storefront or email)',
      ],
      [
        'provider empty',
        { ...base, provider: '' },
        400,
        'Provider parameter is required (storefront or email)',
      ],
      [
        'provider too long',
        { ...base, provider: long },
        400,
        'provider must be at most 100 characters',
      ],
      [
        'provider unknown',
        { ...base, provider: 'web' },
        400,
        "Provider must be either 'storefront' or 'email'",
      ],
      [
        'provider shopify (TrueVault’s name)',
        { ...base, provider: 'shopify' },
        400,
        "Provider must be either 'storefront' or 'email'",
      ],
      [
        'provider in another case',
        { ...base, provider: 'EMAIL' },
        400,
        "Provider must be either 'storefront' or 'email'",
      ],
      [
        'shop missing, storefront',
        { provider: 'storefront', privacy_center_id: 'p' },
        400,
        'Shop domain is required for storefront provider',
      ],
      [
        'shop missing, email',
        { provider: 'email', privacy_center_id: 'p', customer_email: 'a@b.co' },
        400,
        'Shop parameter is required for email provider',
      ],
      [
        'shop empty, email',
        { ...base, shop: '' },
        400,
        'Shop parameter is required for email provider',
      ],
      ['shop too long', { ...base, shop: long }, 400, 'shop must be at most 100 characters'],
      [
        'privacy center missing',
        { provider: 'email', shop: 's', customer_email: 'a@b.co' },
        400,
        'Privacy center ID is required',
      ],
      [
        'privacy center too long',
        { ...base, privacy_center_id: long },
        400,
        'privacy_center_id must be at most 100 characters',
      ],
      [
        'email missing',
        { provider: 'email', shop: 's', privacy_center_id: 'p' },
        400,
        'Customer email is required for email provider',
      ],
      [
        'email empty',
        { ...base, customer_email: ' ' },
        400,
        'Customer email is required for email provider',
      ],
      [
        'email invalid',
        { ...base, customer_email: 'not-an-email' },
        400,
        'Customer email must be a valid email address',
      ],
      [
        'email with a space',
        { ...base, customer_email: 'a b@c.co' },
        400,
        'Customer email must be a valid email address',
      ],
      [
        'client_id not a UUID',
        { ...base, client_id: 'abc' },
        400,
        'client_id must be a valid UUID v4',
      ],
      [
        'client_id a UUID v1',
        { ...base, client_id: '6ba7b810-9dad-11d1-80b4-00c04fd430c8' },
        400,
        'client_id must be a valid UUID v4',
      ],
      [
        'repeated shop',
        'provider=email&shop=a&shop=b&privacy_center_id=p&customer_email=a@b.co',
        400,
        'shop must not be repeated',
      ],
      [
        'repeated email',
        'provider=email&shop=a&privacy_center_id=p&customer_email=a@b.co&customer_email=c@d.co',
        400,
        'customer_email must not be repeated',
      ],
      [
        'repeated customer id',
        'provider=storefront&shop=a&privacy_center_id=p&logged_in_customer_id=1&logged_in_customer_id=2',
        400,
        'logged_in_customer_id must not be repeated',
      ],
      [
        'customer id too long',
        { provider: 'storefront', shop: 's', privacy_center_id: 'p', logged_in_customer_id: long },
        400,
        'logged_in_customer_id must be at most 100 characters',
      ],
    ]
    it.each(cases)('%s → %i', async (_name, query, status, message) => {
      expectConsentError(await t.get(query), status, message)
    })

    it('accepts exactly 100 characters in each text field', async () => {
      const hundred = 'y'.repeat(100)
      recordOf(await t.get({ ...base, shop: hundred, privacy_center_id: hundred }))
    })

    it('creates nothing when it refuses', async () => {
      const before = await t.store.db.selectFrom('consent_records').select('shop').execute()
      await t.get({ ...base, client_id: 'abc' })
      await t.get({ provider: 'storefront', shop: 's', privacy_center_id: 'p' })
      const after = await t.store.db.selectFrom('consent_records').select('shop').execute()
      expect(after.length).toBe(before.length)
    })
  })

  describe('POST /api/v1/cmp/consent', () => {
    async function fresh() {
      return recordOf(await t.get(emailQuery(uniqueEmail()))).jwt
    }

    it('changes only the fields sent; implicit false, existing, same token', async () => {
      const jwt = await fresh()
      const first = recordOf(
        await t.post({ jwt, consentAnalytics: true, consentAdvertising: false }),
      )
      expect(first).toEqual({
        jwt,
        consentAnalytics: true,
        consentAdvertising: false,
        consentPersonalization: null,
        consentTargetedAdvertising: null,
        optedOut: null,
        implicit: false,
        isExisting: true,
      })
      const second = recordOf(await t.post({ jwt, optedOut: true }))
      expect(second).toMatchObject({
        consentAnalytics: true,
        consentAdvertising: false,
        optedOut: true,
      })
    })

    it('sets a field back to unknown with null, and ignores fields it does not know', async () => {
      const jwt = await fresh()
      recordOf(await t.post({ jwt, consentPersonalization: true }))
      const res = recordOf(
        await t.post({
          jwt,
          consentPersonalization: null,
          implicit: true,
          isExisting: false,
          extra: 1,
        }),
      )
      expect(res).toMatchObject({ consentPersonalization: null, implicit: false, isExisting: true })
    })

    it('makes the change visible to the next GET, with a fresh token that also works', async () => {
      const q = emailQuery(uniqueEmail())
      const { jwt } = recordOf(await t.get(q))
      recordOf(await t.post({ jwt, consentTargetedAdvertising: true }))
      t.clock.advance(5_000)
      const read = recordOf(await t.get(q))
      expect(read.consentTargetedAdvertising).toBe(true)
      expect(read.jwt).not.toBe(jwt)
      recordOf(await t.post({ jwt: read.jwt, consentTargetedAdvertising: false }))
      recordOf(await t.post({ jwt, consentAnalytics: false }))
    })

    it('reads the body as JSON whatever its content type (sendBeacon sends text/plain)', async () => {
      const jwt = await fresh()
      const body = JSON.stringify({ jwt, consentAnalytics: true })
      for (const type of [
        'text/plain;charset=UTF-8',
        'application/x-www-form-urlencoded',
        'application/json; charset=utf-8',
      ]) {
        recordOf(await t.post(body, { raw: true, headers: { 'content-type': type } }))
      }
    })

    it('answers the spec’s messages for bad bodies', async () => {
      const jwt = await fresh()
      const cases: [unknown, boolean, number, string][] = [
        ['{"jwt":', true, 400, 'Request body must be valid JSON'],
        ['', true, 400, 'Request body must be valid JSON'],
        ['not json at all', true, 400, 'Request body must be valid JSON'],
        [{}, false, 400, 'Property jwt must be a non-empty string'],
        [{ jwt: '' }, false, 400, 'Property jwt must be a non-empty string'],
        [{ jwt: 42, optedOut: true }, false, 400, 'Property jwt must be a non-empty string'],
        [[jwt], false, 400, 'Property jwt must be a non-empty string'],
        [null, false, 400, 'Property jwt must be a non-empty string'],
        [{ jwt }, false, 400, 'At least one consent field must be provided'],
        [{ jwt, other: true }, false, 400, 'At least one consent field must be provided'],
        [
          { jwt, consentAnalytics: 'yes' },
          false,
          400,
          'Field consentAnalytics must be a boolean or null',
        ],
        [{ jwt, optedOut: 1 }, false, 400, 'Field optedOut must be a boolean or null'],
        [
          { jwt, consentAdvertising: true, consentTargetedAdvertising: 'false' },
          false,
          400,
          'Field consentTargetedAdvertising must be a boolean or null',
        ],
      ]
      for (const [body, raw, status, message] of cases) {
        expectConsentError(await t.post(body, { raw }), status, message)
      }
    })

    it('changes nothing when a field is bad', async () => {
      const q = emailQuery(uniqueEmail())
      const { jwt } = recordOf(await t.get(q))
      await t.post({ jwt, consentAnalytics: true, optedOut: 'yes' })
      expect(recordOf(await t.get(q))).toMatchObject({
        consentAnalytics: null,
        optedOut: null,
        implicit: true,
      })
    })

    it('answers 404 to unknown, tampered, foreign and wrongly signed tokens', async () => {
      const message = 'No valid consent record exists for the provided JWT'
      const jwt = await fresh()
      const [h, p, s] = jwt.split('.') as [string, string, string]
      const iat = Math.floor(t.clock.now().getTime() / 1000)
      const tokens = [
        'not-a-token',
        // A changed first character (the last one holds unused padding bits: some changes there
        // decode to the very same signature).
        `${h}.${p}.${s[0] === 'A' ? 'B' : 'A'}${s.slice(1)}`,
        `${h}.${b64({ ...claimsOf(jwt), consumerIdentifier: 'someone@else.example' })}.${s}`,
        // Well signed, but nobody by that name ever asked: no record.
        handMadeToken({
          consumerIdentifier: 'never@seen.example',
          consumerPartition: 'shop.example',
          iat,
        }),
        handMadeToken(claimsOf(jwt), 'some other secret that is long enough to use'),
        handMadeToken(claimsOf(jwt), TEST_CONSENT_SECRET, 'HS512'),
        `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`,
      ]
      for (const token of tokens) {
        expectConsentError(await t.post({ jwt: token, optedOut: true }), 404, message)
      }
    })

    it('refuses a token of one shop for another shop’s record', async () => {
      const email = uniqueEmail()
      const a = recordOf(await t.get(emailQuery(email, 'a.example'))).jwt
      const b = recordOf(await t.get(emailQuery(email, 'b.example'))).jwt
      recordOf(await t.post({ jwt: a, optedOut: true }))
      expect(recordOf(await t.get(emailQuery(email, 'b.example'))).optedOut).toBeNull()
      // Through a proxy that names the shop: the token must be that shop's.
      expectConsentError(
        await t.post({ jwt: a, optedOut: false }, { query: 'shop=b.example' }),
        404,
        'No valid consent record exists for the provided JWT',
      )
      recordOf(await t.post({ jwt: b, optedOut: false }, { query: 'shop=b.example' }))
      expectConsentError(
        await t.post({ jwt: b, optedOut: false }, { query: 'shop=b.example&shop=b.example' }),
        400,
        'shop must not be repeated',
      )
      expect(recordOf(await t.get(emailQuery(email, 'a.example'))).optedOut).toBe(true)
    })

    it('refuses a body over 16 KiB with 413', async () => {
      const jwt = await fresh()
      const res = await t.post({ jwt, optedOut: true, pad: 'x'.repeat(20_000) })
      expectConsentError(res, 413, 'Request body is too large')
    })
  })

  describe('its own listener', () => {
    it('answers unknown paths and methods with 404 in its own error body', async () => {
      for (const [method, url] of [
        ['GET', '/v1/auth/me'],
        // Its own /openapi.json is served (openapi-structure.test.ts); no docs page.
        ['GET', '/docs'],
        ['POST', '/v1/auth/login'],
        ['PUT', CONSENT],
        ['DELETE', CONSENT],
        [
          'HEAD',
          `${CONSENT}?provider=email&shop=s&privacy_center_id=p&customer_email=head@example.com`,
        ],
      ] as const) {
        const res = await t.app.inject({ method, url })
        expect(res.statusCode, `${method} ${url}`).toBe(404)
        expect(res.headers['cache-control']).toBe('no-store')
        if (method !== 'HEAD') expect(res.json()).toEqual({ error: 'Not found' })
      }
      // HEAD created nothing.
      const rows = await t.store.db
        .selectFrom('consent_records')
        .select('consumer_digest')
        .execute()
      const digest = t.deps.consent.keys.digest('s', 'head@example.com')
      expect(rows.map((r) => r.consumer_digest)).not.toContain(digest)
    })

    it('is not reachable through the main API, which keeps its envelope', async () => {
      const main = t.mainApp as NonNullable<typeof t.mainApp>
      for (const method of ['GET', 'POST'] as const) {
        const res = await main.inject({
          method,
          url: `${CONSENT}?${new URLSearchParams(emailQuery('main@example.com')).toString()}`,
        })
        expect(res.statusCode).toBe(404)
        expect(res.json()).toMatchObject({ result: 'error', error: { code: 'ROUTE_NOT_FOUND' } })
      }
      expect(
        await t.store.db
          .selectFrom('consent_events')
          .selectAll()
          .where('shop', '=', 'shop.example')
          .execute(),
      ).not.toContainEqual(
        expect.objectContaining({
          consumer_digest: t.deps.consent.keys.digest('shop.example', 'main@example.com'),
        }),
      )
    })

    it('sends no-store on every answer, errors included', async () => {
      for (const res of [
        await t.get(emailQuery(uniqueEmail())),
        await t.get({}),
        await t.post('{', { raw: true }),
        await t.app.inject({ method: 'GET', url: '/nothing' }),
      ]) {
        expect(res.headers['cache-control']).toBe('no-store')
        expect(res.headers['x-content-type-options']).toBe('nosniff')
      }
    })
  })
})
