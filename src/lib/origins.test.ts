import { describe, expect, it } from 'vitest'
import { originMatcher } from './origins.js'

describe('originMatcher', () => {
  const allowed = originMatcher(['https://app.example.com', 'https://*.myshopify.com'])

  it('matches exact origins exactly', () => {
    expect(allowed('https://app.example.com')).toBe(true)
    for (const origin of [
      'https://app.example.com:443',
      'https://app.example.com/',
      'http://app.example.com',
      'https://APP.example.com',
      'https://app.example.com.evil.example',
      'https://xapp.example.com',
      '',
      'null',
    ])
      expect(allowed(origin), origin).toBe(false)
  })

  it('lets a pattern stand for exactly one DNS label (1 to 63 characters)', () => {
    expect(allowed('https://my-shop.myshopify.com')).toBe(true)
    expect(allowed(`https://${'a'.repeat(63)}.myshopify.com`)).toBe(true)
    expect(allowed(`https://${'a'.repeat(64)}.myshopify.com`)).toBe(false)
    for (const origin of [
      'https://myshopify.com',
      'https://.myshopify.com',
      'https://a.b.myshopify.com',
      'https://-shop.myshopify.com',
      'https://shop-.myshopify.com',
      'https://Shop.myshopify.com',
      'http://shop.myshopify.com',
      'https://shop.myshopify.com:8443',
      'https://shop.myshopify.com.evil.example',
      'https://evil.example/.myshopify.com',
    ])
      expect(allowed(origin), origin).toBe(false)
  })
})
