import { describe, expect, it } from 'vitest'
import { REDACTED, redactLogObject } from './logging.js'

describe('redactLogObject', () => {
  it('censors secret headers and query parameters wherever they sit, keeping the rest', () => {
    const headers = {
      authorization: 'Basic c2VjcmV0Og==',
      'Proxy-Authorization': 'Basic x',
      cookie: 'a=b',
      'set-cookie': ['a=b'],
      'x-api-key': 'k',
      'x-shopify-hmac-sha256': 'h',
      'x-shopify-shop-domain': 'shop.example',
      'content-type': 'multipart/form-data',
      host: 'localhost',
    }
    const line = {
      busboyOptions: { headers, limits: { fields: 100 } },
      headers,
      req: { query: { signature: 's', shop: 'a' } },
      deep: [{ x: { response: { config: { headers } } } }],
      rawHeaders: ['Authorization', 'Basic c2VjcmV0Og=='],
      status: 200,
    }
    const out = redactLogObject(line) as typeof line
    for (const h of [out.busboyOptions.headers, out.headers]) {
      expect(h).toEqual({
        ...headers,
        authorization: REDACTED,
        'Proxy-Authorization': REDACTED,
        cookie: REDACTED,
        'set-cookie': REDACTED,
        'x-api-key': REDACTED,
        'x-shopify-hmac-sha256': REDACTED,
        'x-shopify-shop-domain': REDACTED,
      })
    }
    expect(out.busboyOptions.limits).toEqual({ fields: 100 })
    expect(out.req.query).toEqual({ signature: REDACTED, shop: 'a' })
    expect(JSON.stringify(out.deep)).not.toContain('c2VjcmV0')
    expect(out.rawHeaders).toBe(REDACTED)
    expect(out.status).toBe(200)
    // The caller's objects are untouched.
    expect(line.headers.authorization).toBe('Basic c2VjcmV0Og==')
  })

  it('returns a line without objects as is (the per-request line costs nothing)', () => {
    const line = { method: 'GET', route: '/v1/vaults', status: 200, ms: 1 }
    expect(redactLogObject(line)).toBe(line)
  })

  it('does not enter class instances (errors keep their type for the err serializer)', () => {
    const err = Object.assign(new Error('x'), { headers: { authorization: 'y' } })
    const line = { err }
    expect(redactLogObject(line).err).toBe(err)
  })
})
