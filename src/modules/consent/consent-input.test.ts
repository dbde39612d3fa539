import { describe, expect, it } from 'vitest'
import { ConsentError } from './consent-errors.js'
import { isEmail, isUuidV4, parseConsentQuery, parseConsentUpdate } from './consent-input.js'
import { parseQuery } from './signature.js'

const query = (text: string) => parseConsentQuery(parseQuery(text))

function refusal(run: () => unknown): { status: number; message: string } {
  try {
    run()
  } catch (e) {
    if (e instanceof ConsentError) return { status: e.statusCode, message: e.message }
    throw e
  }
  throw new Error('expected a ConsentError')
}

describe('isUuidV4', () => {
  it('needs a 4 in the version nibble, any case, any variant', () => {
    expect(isUuidV4('3b241101-e2bb-4255-8caf-4136c566a962')).toBe(true)
    expect(isUuidV4('3B241101-E2BB-4255-8CAF-4136C566A962')).toBe(true)
    // Seen from real Polaris clients (variant nibble c): accepted, the id is only recorded.
    expect(isUuidV4('3b241101-e2bb-4fd3-cd46-4136c566a962')).toBe(true)
    // TrueVault's own doc example is a version 1 UUID.
    expect(isUuidV4('6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe(false)
    expect(isUuidV4('3b241101e2bb42558caf4136c566a962')).toBe(false)
    expect(isUuidV4('3b241101-e2bb-4255-8caf-4136c566a96')).toBe(false)
    expect(isUuidV4('{3b241101-e2bb-4255-8caf-4136c566a962}')).toBe(false)
  })
})

describe('isEmail', () => {
  it('accepts ordinary and international addresses', () => {
    for (const ok of [
      'ada@example.com',
      'a.b+tag@sub.example.co.uk',
      'josé@exämple.de',
      'x@a-b.io',
    ]) {
      expect(isEmail(ok), ok).toBe(true)
    }
  })
  it('refuses what is not an address', () => {
    for (const bad of [
      'ada',
      'ada@',
      '@example.com',
      'ada@example',
      'ada@@example.com',
      'ada example@example.com',
      'ada@exa mple.com',
      'ada@-example.com',
      'ada@example.c',
      'a\u0000@example.com',
      `${'a'.repeat(65)}@example.com`,
      `a@${'b'.repeat(250)}.com`,
    ]) {
      expect(isEmail(bad), bad).toBe(false)
    }
  })
})

describe('parseConsentQuery', () => {
  const email =
    'provider=email&shop=shop.example&privacy_center_id=pc-1&customer_email=Ada@Example.COM'

  it('reads an email request, normalizing the address and client id', () => {
    expect(query(`${email}&client_id=3B241101-E2BB-4255-8CAF-4136C566A962`)).toEqual({
      provider: 'email',
      shop: 'shop.example',
      privacyCenterId: 'pc-1',
      customerId: undefined,
      email: 'ada@example.com',
      clientId: '3b241101-e2bb-4255-8caf-4136c566a962',
    })
  })

  it('reads a storefront request; an empty customer id stays empty (checked later)', () => {
    const q = query(
      'provider=storefront&shop=s.myshopify.com&privacy_center_id=p&logged_in_customer_id=',
    )
    expect(q.customerId).toBe('')
    expect(q.email).toBeUndefined()
    expect(query('provider=storefront&shop=s&privacy_center_id=p').customerId).toBeUndefined()
  })

  it('treats an empty client_id as absent', () => {
    expect(query(`${email}&client_id=`).clientId).toBeUndefined()
  })

  it('checks in the order of the spec table', () => {
    // Everything wrong: the provider is reported first, then the shop, and so on.
    expect(refusal(() => query('shop=&privacy_center_id=')).message).toBe(
      'Provider parameter is required (storefront or email)',
    )
    expect(refusal(() => query('provider=email&client_id=x')).message).toBe(
      'Shop parameter is required for email provider',
    )
    expect(refusal(() => query('provider=email&shop=s&client_id=x')).message).toBe(
      'Privacy center ID is required',
    )
    expect(
      refusal(() => query('provider=email&shop=s&privacy_center_id=p&client_id=x')).message,
    ).toBe('Customer email is required for email provider')
  })

  it('refuses a repeated parameter it reads', () => {
    for (const name of ['provider', 'shop', 'privacy_center_id', 'customer_email', 'client_id']) {
      const value = name === 'provider' ? 'email' : name === 'customer_email' ? 'a@b.co' : 'x'
      const once = `${email}&client_id=3b241101-e2bb-4255-8caf-4136c566a962`
      expect(refusal(() => query(`${once}&${name}=${value}`))).toEqual({
        status: 400,
        message: `${name} must not be repeated`,
      })
    }
  })

  it('takes logged_in_customer_id only as Shopify numeric id: up to 20 digits, no leading zero', () => {
    const base = 'provider=storefront&shop=s&privacy_center_id=p&logged_in_customer_id='
    expect(query(`${base}${'9'.repeat(20)}`).customerId).toBe('9'.repeat(20))
    expect(query(`${base}1`).customerId).toBe('1')
    // Empty: nobody is logged in (answered 401 later, after the signature).
    expect(query(base).customerId).toBe('')
    const invalid = 'logged_in_customer_id must be a numeric Shopify customer id'
    for (const value of [
      '9'.repeat(21),
      'n%3DX',
      '0',
      '01',
      '-1',
      '1.0',
      '+1',
      '%201',
      '1e3',
      'abc',
    ]) {
      expect(
        refusal(() => query(`${base}${value}`)),
        value,
      ).toEqual({ status: 400, message: invalid })
    }
    // The length rule still comes first (the order of the spec's table).
    expect(refusal(() => query(`${base}${'1'.repeat(101)}`)).message).toBe(
      'logged_in_customer_id must be at most 100 characters',
    )
  })
})

describe('parseConsentUpdate', () => {
  it('keeps only the preference fields sent, null included', () => {
    expect(
      parseConsentUpdate({ jwt: 't', optedOut: true, consentAnalytics: null, other: 1 }),
    ).toEqual({
      jwt: 't',
      changes: { optedOut: true, consentAnalytics: null },
    })
  })

  it('refuses an empty body as invalid JSON, and a non-object as missing its jwt', () => {
    expect(refusal(() => parseConsentUpdate(undefined)).message).toBe(
      'Request body must be valid JSON',
    )
    for (const body of [null, [], 'jwt', 3, true]) {
      expect(refusal(() => parseConsentUpdate(body)).message).toBe(
        'Property jwt must be a non-empty string',
      )
    }
  })

  it('needs a non-empty string jwt, then a field, then booleans', () => {
    for (const jwt of [undefined, '', '   ', 5, null, ['t'], { t: 1 }]) {
      expect(refusal(() => parseConsentUpdate({ jwt, optedOut: true })).message).toBe(
        'Property jwt must be a non-empty string',
      )
    }
    expect(refusal(() => parseConsentUpdate({ jwt: 't' })).message).toBe(
      'At least one consent field must be provided',
    )
    for (const value of ['true', 1, 0, {}, [], 'false']) {
      expect(refusal(() => parseConsentUpdate({ jwt: 't', optedOut: value })).message).toBe(
        'Field optedOut must be a boolean or null',
      )
    }
  })
})
