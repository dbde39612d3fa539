import { describe, expect, it } from 'vitest'
import { AppError } from '../../lib/errors.js'
import {
  checkEmail,
  checkMediaUrl,
  checkRecipientNumber,
  checkSenderNumber,
} from './address-checks.js'

function refusal(run: () => unknown): string {
  try {
    run()
  } catch (e) {
    expect(e).toBeInstanceOf(AppError)
    expect((e as AppError).statusCode).toBe(400)
    return (e as AppError).message
  }
  throw new Error('expected a 400')
}

describe('checkEmail', () => {
  it.each([
    ['ada@example.com', 'ada@example.com'],
    ['  ada+news@mail.example.co.uk\n', 'ada+news@mail.example.co.uk'],
    ["o'brien.x_y-z@sub-domain.example.org", "o'brien.x_y-z@sub-domain.example.org"],
  ])('accepts %j', (input, out) => {
    expect(checkEmail(input, 'to_email_address')).toBe(out)
  })

  it('says when the value resolved to nothing', () => {
    expect(refusal(() => checkEmail('  ', 'to_email_address'))).toBe(
      'to_email_address resolved to an empty value',
    )
  })

  it.each([
    'ada',
    'ada@',
    '@example.com',
    'ada@localhost',
    'ada@example..com',
    'ada@-example.com',
    'a da@example.com',
    'ada@example.com\r\nBcc: eve@example.com',
    'Ada <ada@example.com>',
    'ada@exämple.com',
    `${'a'.repeat(65)}@example.com`,
    `ada@${'a'.repeat(61)}.${'b'.repeat(61)}.${'c'.repeat(61)}.${'d'.repeat(61)}.com`,
  ])('refuses %j without echoing it', (input) => {
    const message = refusal(() => checkEmail(input, 'from_email_address'))
    expect(message).toBe('from_email_address does not resolve to a valid email address')
  })
})

describe('phone numbers', () => {
  it('normalizes formatted recipients to E.164', () => {
    expect(checkRecipientNumber('+15558675309', 'to_number')).toBe('+15558675309')
    expect(checkRecipientNumber(' +1 (555) 867-5309 ', 'to_number')).toBe('+15558675309')
    expect(checkRecipientNumber('+44.20.7946.0958', 'to_number')).toBe('+442079460958')
  })

  it.each([
    '15558675309',
    '+0555867530',
    '+1555',
    '+1234567890123456',
    '+1555abc5309',
    'tel:+15558675309',
  ])('refuses recipient %j', (input) => {
    expect(refusal(() => checkRecipientNumber(input, 'to_number'))).toBe(
      'to_number does not resolve to an E.164 phone number (+ and 7 to 15 digits)',
    )
  })

  it('takes E.164, short codes and alphanumeric sender ids as the sender', () => {
    expect(checkSenderNumber('+1 555 555 5555', 'from_number')).toBe('+15555555555')
    expect(checkSenderNumber('24365', 'from_number')).toBe('24365')
    expect(checkSenderNumber('Coffer Inc', 'from_number')).toBe('Coffer Inc')
    expect(refusal(() => checkSenderNumber('123456789012', 'from_number'))).toContain('from_number')
    expect(refusal(() => checkSenderNumber('Much Too Long Name', 'from_number'))).toContain(
      'from_number does not resolve',
    )
    expect(refusal(() => checkSenderNumber('', 'from_number'))).toBe(
      'from_number resolved to an empty value',
    )
  })
})

describe('checkMediaUrl', () => {
  it.each([
    ['https://cdn.example.com/cat.png', 'https://cdn.example.com/cat.png'],
    ['http://images.example.org/a b.jpg', 'http://images.example.org/a%20b.jpg'],
    ['HTTPS://Example.COM./x.gif?size=2', 'https://example.com./x.gif?size=2'],
    ['https://8.8.8.8/pic.png', 'https://8.8.8.8/pic.png'],
    ['https://[2606:4700::1111]/pic.png', 'https://[2606:4700::1111]/pic.png'],
    ['https://[::ffff:808:808]/pic.png', 'https://[::ffff:808:808]/pic.png'],
  ])('accepts %j as %j', (input, out) => {
    expect(checkMediaUrl(input, 'media_urls.0')).toBe(out)
  })

  it.each([
    'ftp://example.com/cat.png',
    'file:///etc/passwd',
    'data:image/png;base64,AAAA',
    'javascript:alert(1)',
  ])('refuses the scheme of %j', (input) => {
    expect(refusal(() => checkMediaUrl(input, 'media_urls.0'))).toBe(
      'media_urls.0 must resolve to an http or https URL',
    )
  })

  it.each(['/relative/cat.png', 'cat.png', 'https://', `https://example.com/${'a'.repeat(2048)}`])(
    'refuses %j as not an absolute URL',
    (input) => {
      expect(refusal(() => checkMediaUrl(input, 'media_urls.1'))).toBe(
        'media_urls.1 does not resolve to an absolute http(s) URL of at most 2048 characters',
      )
    },
  )

  it('refuses credentials in the URL', () => {
    expect(refusal(() => checkMediaUrl('https://user:pw@example.com/x.png', 'media_urls.0'))).toBe(
      'media_urls.0 must not carry credentials',
    )
  })

  it.each([
    'http://localhost/x.png',
    'http://LOCALHOST./x.png',
    'http://app.localhost/x.png',
    'http://printer.local/x.png',
    'http://metadata.google.internal/computeMetadata/v1/',
    'http://nas.home.arpa/x.png',
    'http://intranet/x.png',
    'http://127.0.0.1/x.png',
    'http://127.1/x.png',
    'http://2130706433/x.png',
    'http://0x7f000001/x.png',
    'http://0.0.0.0/x.png',
    'http://10.1.2.3/x.png',
    'http://172.16.0.1/x.png',
    'http://172.31.255.255/x.png',
    'http://192.168.1.1/x.png',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/x.png',
    'http://224.0.0.1/x.png',
    'http://255.255.255.255/x.png',
    'http://[::1]/x.png',
    'http://[::]/x.png',
    'http://[fe80::1]/x.png',
    'http://[fc00::1]/x.png',
    'http://[fd12:3456::1]/x.png',
    'http://[::ffff:127.0.0.1]/x.png',
    'http://[::ffff:a9fe:a9fe]/x.png',
    'http://[2001:db8::1]/x.png',
    'http://[2002:7f00:1::]/x.png',
    'http://[64:ff9b::7f00:1]/x.png',
    'http://[ff02::1]/x.png',
  ])('refuses the non-public host of %j', (input) => {
    expect(refusal(() => checkMediaUrl(input, 'media_urls.0'))).toBe(
      'media_urls.0 must point to a public host',
    )
  })

  it('keeps the public part of a URL that only looks tricky', () => {
    // WHATWG parsing treats the backslash as a path separator: the host is evil.example.com.
    expect(checkMediaUrl('http://evil.example.com\\@127.0.0.1/x.png', 'media_urls.0')).toBe(
      'http://evil.example.com/@127.0.0.1/x.png',
    )
  })
})
