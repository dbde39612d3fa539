import { describe, expect, it } from 'vitest'
import { addressKey } from './consent-rate-limit.js'

describe('addressKey', () => {
  it('counts IPv4 addresses one by one, IPv4-mapped ones as IPv4', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7')
    expect(addressKey('::ffff:203.0.113.7')).toBe('203.0.113.7')
  })

  it('counts IPv6 addresses by their /64, however written', () => {
    const key = '2001:db8:0:1::/64'
    expect(addressKey('2001:db8:0:1::1')).toBe(key)
    expect(addressKey('2001:db8:0:1:ffff:ffff:ffff:ffff')).toBe(key)
    expect(addressKey('2001:0db8:0000:0001:0:0:0:2')).toBe(key)
    expect(addressKey('2001:db8:0:2::1')).not.toBe(key)
    expect(addressKey('::1')).toBe('0:0:0:0::/64')
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64')
  })

  it('puts requests without an address together instead of failing', () => {
    expect(addressKey(undefined)).toBe('')
    expect(addressKey('')).toBe('')
  })
})
