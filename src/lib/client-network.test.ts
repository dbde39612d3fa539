import { describe, expect, it } from 'vitest'
import { clientNetwork } from './client-network.js'

describe('clientNetwork', () => {
  it('keeps IPv4 addresses, also IPv4-mapped ones', () => {
    expect(clientNetwork('203.0.113.7')).toBe('203.0.113.7')
    expect(clientNetwork('::ffff:203.0.113.7')).toBe('203.0.113.7')
  })

  it('folds IPv6 addresses to their /64, however they are written', () => {
    const net = '2001:db8:0:1::/64'
    expect(clientNetwork('2001:db8:0:1::1')).toBe(net)
    expect(clientNetwork('2001:0db8:0000:0001:ffff:ffff:ffff:ffff')).toBe(net)
    expect(clientNetwork('2001:DB8::1:0:0:0:9')).toBe(net)
    expect(clientNetwork('2001:db8:0:2::1')).not.toBe(net)
    expect(clientNetwork('::1')).toBe('0:0:0:0::/64')
    expect(clientNetwork('fe80::1%eth0')).toBe('fe80:0:0:0::/64')
  })

  it('uses anything else as given', () => {
    expect(clientNetwork('client-a')).toBe('client-a')
  })
})
