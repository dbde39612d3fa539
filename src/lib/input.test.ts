import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { AppError } from './errors.js'
import {
  decodeBase64Json,
  encodeBase64Json,
  findMalformed,
  isTrue,
  isWellFormedText,
  parseFutureTime,
  parseIdList,
} from './input.js'

/** The AppError `fn` throws; fails the test when it throws nothing or something else. */
function thrown(fn: () => unknown): AppError {
  try {
    fn()
  } catch (e) {
    expect(e).toBeInstanceOf(AppError)
    return e as AppError
  }
  throw new Error('expected an AppError, nothing was thrown')
}

/** Asserts a 400 whose message starts with the field name (the API names the bad field). */
function expectInvalidField(fn: () => unknown, field: string, problem?: string): AppError {
  const error = thrown(fn)
  expect(error.statusCode).toBe(400)
  expect(error.code).toBe('INVALID_PARAMETER')
  expect(error.message.startsWith(`${field} `)).toBe(true)
  if (problem !== undefined) expect(error.message).toContain(problem)
  return error
}

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64')

/** Ruby's `Base64.encode64`: a `\n` after every 60 characters and at the end. */
function rubyEncode64(text: string): string {
  const flat = b64(text)
  let out = ''
  for (let i = 0; i < flat.length; i += 60) out += `${flat.slice(i, i + 60)}\n`
  return out
}

describe('isTrue', () => {
  it.each([true, 'true', 'TRUE', 'True', ' true ', '1', '01', ' 1\n', '\t01 '])(
    'accepts %j',
    (v) => {
      expect(isTrue(v)).toBe(true)
    },
  )

  it.each([
    false,
    'false',
    '0',
    '00',
    '',
    ' ',
    'yes',
    'on',
    't',
    '001',
    '10',
    '11',
    'truee',
    undefined,
    null,
    0,
    1,
    2,
    Number.NaN,
    {},
    [],
    ['true'],
  ])('rejects %j', (v) => {
    expect(isTrue(v)).toBe(false)
  })
})

describe('decodeBase64Json', () => {
  it.each([
    ['an object', { a: 1, b: [true, null], c: { d: 'x' } }],
    ['an array', [1, 'two', { three: 3 }]],
    ['a string', 'hello'],
    ['an empty string', ''],
    ['a number', 42],
    ['a negative float', -1.5e-7],
    ['true', true],
    ['false', false],
    ['null', null],
    ['an empty object', {}],
    ['an empty array', []],
    ['unicode text', { name: 'Zoë 😀 日本語', 'clé é': '\u0000\u2028' }],
  ])('decodes %s', (_, value) => {
    expect(decodeBase64Json(b64(JSON.stringify(value)), 'field')).toEqual(value)
  })

  it('decodes Ruby-style output wrapped every 60 characters with a trailing newline', () => {
    const value = { attributes: 'x'.repeat(200), list: Array.from({ length: 30 }, (_, i) => i) }
    const ruby = rubyEncode64(JSON.stringify(value))
    expect(ruby).toContain('\n')
    expect(ruby.endsWith('\n')).toBe(true)
    expect(ruby.split('\n')[0]).toHaveLength(60)
    expect(decodeBase64Json(ruby, 'attributes')).toEqual(value)
  })

  it('decodes output wrapped with CRLF line breaks', () => {
    const value = { text: 'y'.repeat(150) }
    const crlf = rubyEncode64(JSON.stringify(value)).replace(/\n/g, '\r\n')
    expect(decodeBase64Json(crlf, 'attributes')).toEqual(value)
  })

  it('reads a space as the `+` that an urlencoded form turned into one', () => {
    // '{"a":">>>"}' encodes with a `+`.
    const value = { a: '>>>' }
    const encoded = b64(JSON.stringify(value))
    expect(encoded).toContain('+')
    expect(decodeBase64Json(encoded.replace(/\+/g, ' '), 'attributes')).toEqual(value)
  })

  it('reads a space as `+` even inside Ruby-wrapped output', () => {
    const value = { a: '>>>'.repeat(40), b: '???'.repeat(40) }
    const ruby = rubyEncode64(JSON.stringify(value))
    expect(ruby).toContain('+')
    expect(decodeBase64Json(ruby.replace(/\+/g, ' '), 'attributes')).toEqual(value)
  })

  it('accepts the URL-safe alphabet', () => {
    const value = { a: '>>>', b: '???' }
    const encoded = Buffer.from(JSON.stringify(value)).toString('base64url')
    expect(encoded).toMatch(/[-_]/)
    expect(decodeBase64Json(encoded, 'attributes')).toEqual(value)
  })

  it('accepts missing padding', () => {
    for (const value of [{ a: 1 }, { ab: 1 }, { abc: 1 }]) {
      const encoded = b64(JSON.stringify(value))
      expect(decodeBase64Json(encoded.replace(/=+$/, ''), 'attributes')).toEqual(value)
    }
    expect(b64('{"a":1}')).toBe('eyJhIjoxfQ==')
    expect(decodeBase64Json('eyJhIjoxfQ', 'attributes')).toEqual({ a: 1 })
    expect(decodeBase64Json('eyJhIjoxfQ=', 'attributes')).toEqual({ a: 1 })
  })

  it.each([
    ['a number', 123],
    ['null', null],
    ['undefined', undefined],
    ['an object', { a: 1 }],
    ['an array', ['eyJhIjoxfQ==']],
    ['a buffer', Buffer.from('eyJhIjoxfQ==')],
    ['a boolean', true],
  ])('rejects %s (not a string)', (_, value) => {
    expectInvalidField(() => decodeBase64Json(value, 'attributes'), 'attributes', 'base64 string')
  })

  it.each([
    ['empty text', ''],
    ['only line breaks', '\n\r\n'],
    ['a character outside base64', 'eyJhIjox*Q=='],
    ['a non-ASCII letter', 'eyJhIjoxfé=='],
    ['punctuation', '!!!!'],
    ['padding in the middle', 'eyJh=IjoxfQ'],
    ['three padding characters', 'eyJhIjoxfQ==='],
    ['a JSON text, not base64', '{"a":1}'],
    ['length % 4 == 1', 'eyJhI'],
    ['length % 4 == 1 after dropping whitespace', 'eyJhIjoxfQ==e\n'],
    ['base64 of plain text', b64('hello world')],
    ['base64 of JavaScript, not JSON', b64("{a: 1, 'b': undefined}")],
    ['base64 of truncated JSON', b64('{"a":')],
    ['base64 of trailing garbage', b64('{"a":1} x')],
    ['base64 of whitespace', b64('   ')],
  ])('rejects %s with a 400 naming the field', (_, value) => {
    expectInvalidField(() => decodeBase64Json(value, 'policy'), 'policy', 'base64-encoded JSON')
  })

  it('round-trips any JSON value through any line wrapping and form mangling', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ stringUnit: 'grapheme' }),
        fc.integer({ min: 1, max: 80 }),
        fc.constantFrom('\n', '\r\n', '\r', '\n\n'),
        fc.boolean(),
        fc.constantFrom('plain', 'plus-as-space', 'url-safe'),
        fc.boolean(),
        (value, width, eol, trailing, alphabet, stripPadding) => {
          let flat = encodeBase64Json(value)
          if (stripPadding) flat = flat.replace(/=+$/, '')
          if (alphabet === 'url-safe') flat = flat.replace(/\+/g, '-').replace(/\//g, '_')
          const lines: string[] = []
          for (let i = 0; i < flat.length; i += width) lines.push(flat.slice(i, i + width))
          let wrapped = lines.join(eol) + (trailing ? eol : '')
          if (alphabet === 'plus-as-space') wrapped = wrapped.replace(/\+/g, ' ')
          expect(decodeBase64Json(wrapped, 'attributes')).toEqual(JSON.parse(JSON.stringify(value)))
        },
      ),
      { numRuns: 500 },
    )
  })
})

describe('encodeBase64Json', () => {
  it('is standard, padded, unwrapped base64 of the JSON text', () => {
    expect(encodeBase64Json({ a: 1 })).toBe('eyJhIjoxfQ==')
    expect(encodeBase64Json(null)).toBe('bnVsbA==')
    const long = encodeBase64Json({ text: '>>>?'.repeat(100) })
    expect(long).toMatch(/^[A-Za-z0-9+/]+={0,2}$/)
    expect(long.length % 4).toBe(0)
  })

  it('encodes text as UTF-8', () => {
    const encoded = encodeBase64Json({ name: 'Zoë 😀' })
    expect(Buffer.from(encoded, 'base64').toString('utf8')).toBe('{"name":"Zoë 😀"}')
  })

  it('is the inverse of decodeBase64Json', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const normal = JSON.parse(JSON.stringify(value))
        expect(decodeBase64Json(encodeBase64Json(value), 'x')).toEqual(normal)
        expect(encodeBase64Json(decodeBase64Json(encodeBase64Json(value), 'x'))).toBe(
          encodeBase64Json(value),
        )
      }),
    )
  })
})

describe('parseIdList', () => {
  const A = '0190a4f5-1c2d-7e3f-8a1b-2c3d4e5f6a7b'
  const B = '6f9619ff-8b86-d011-b42d-00c04fc964ff'
  const C = '00000000-0000-4000-8000-000000000000'

  it('reads nothing as an empty list', () => {
    expect(parseIdList(undefined, 'user_ids')).toEqual([])
    expect(parseIdList(null, 'user_ids')).toEqual([])
    expect(parseIdList('', 'user_ids')).toEqual([])
    expect(parseIdList(' , ,', 'user_ids')).toEqual([])
    expect(parseIdList([], 'user_ids')).toEqual([])
  })

  it('splits a comma list', () => {
    expect(parseIdList(A, 'user_ids')).toEqual([A])
    expect(parseIdList(`${A},${B},${C}`, 'user_ids')).toEqual([A, B, C])
  })

  it('trims spaces around items', () => {
    expect(parseIdList(` ${A} ,\t${B}\n, ${C}`, 'user_ids')).toEqual([A, B, C])
  })

  it('skips empty items', () => {
    expect(parseIdList(`,${A},,${B},`, 'user_ids')).toEqual([A, B])
  })

  it('accepts an array of ids', () => {
    expect(parseIdList([A, ` ${B} `, ''], 'user_ids')).toEqual([A, B])
  })

  it('lower-cases ids', () => {
    expect(parseIdList(`${A.toUpperCase()},${B}`, 'user_ids')).toEqual([A, B])
  })

  it('removes duplicates, also ones differing only in case, keeping first-seen order', () => {
    expect(parseIdList(`${B},${A},${B},${A.toUpperCase()},${C},${B}`, 'user_ids')).toEqual([
      B,
      A,
      C,
    ])
  })

  it.each([
    'not-a-uuid',
    `${A}x`,
    A.slice(1),
    A.replace(/-/g, ''),
    `{${A}}`,
    A.replace('a', 'g'),
    `${A} ${B}`,
  ])('rejects the invalid UUID %j with a 400 naming the field', (bad) => {
    const error = expectInvalidField(
      () => parseIdList(`${A},${bad}`, 'group_ids'),
      'group_ids',
      'invalid UUID',
    )
    expect(error.message).toContain(bad.trim().slice(0, 64))
  })

  it('quotes at most 64 characters of an invalid id', () => {
    const error = expectInvalidField(() => parseIdList('z'.repeat(10_000), 'user_ids'), 'user_ids')
    expect(error.message).toContain('z'.repeat(64))
    expect(error.message).not.toContain('z'.repeat(65))
  })

  it('enforces the maximum', () => {
    expect(parseIdList(`${A},${B}`, 'user_ids', 2)).toEqual([A, B])
    expectInvalidField(() => parseIdList(`${A},${B},${C}`, 'user_ids', 2), 'user_ids', 'at most 2')
    expectInvalidField(() => parseIdList([A, B], 'user_ids', 1), 'user_ids', 'at most 1')
  })

  it('does not count empty items toward the maximum', () => {
    expect(parseIdList(`${A},,,${B},`, 'user_ids', 2)).toEqual([A, B])
  })

  it.each([
    ['a number', [A, 1]],
    ['null', [null]],
    ['an object', [{ id: A }]],
    ['a nested array', [[A]]],
  ])('rejects an item that is %s', (_, value) => {
    expectInvalidField(() => parseIdList(value, 'user_ids'), 'user_ids', 'string ids')
  })

  it.each([
    ['a number', 42],
    ['an object', { 0: '' }],
    ['a boolean', true],
  ])('rejects a value that is %s', (_, value) => {
    expectInvalidField(() => parseIdList(value, 'user_ids'), 'user_ids')
  })

  it('returns canonical, lower-case, distinct UUIDs for any list of UUIDs', () => {
    fc.assert(
      fc.property(fc.array(fc.uuid(), { maxLength: 20 }), fc.boolean(), (ids, upper) => {
        const text = ids.map((id) => (upper ? id.toUpperCase() : id)).join(',')
        const parsed = parseIdList(text, 'user_ids')
        expect(parsed).toEqual([...new Set(ids.map((id) => id.toLowerCase()))])
      }),
    )
  })
})

describe('parseFutureTime', () => {
  const now = new Date('2025-06-01T12:00:00.000Z')
  const field = 'not_valid_after'
  const originalTz = process.env.TZ

  afterEach(() => {
    if (originalTz === undefined) delete process.env.TZ
    else process.env.TZ = originalTz
  })

  it.each([
    ['UTC with Z', '2030-01-01T10:00:00Z', '2030-01-01T10:00:00.000Z'],
    ['a positive offset', '2030-01-01T10:00:00+02:00', '2030-01-01T08:00:00.000Z'],
    ['a negative offset', '2030-01-01T10:00:00-05:30', '2030-01-01T15:30:00.000Z'],
    ['an offset without colon', '2030-01-01T10:00:00+0200', '2030-01-01T08:00:00.000Z'],
    ['milliseconds', '2030-01-01T10:00:00.123Z', '2030-01-01T10:00:00.123Z'],
    [
      'microseconds (truncated to millis)',
      '2030-01-01T10:00:00.123456Z',
      '2030-01-01T10:00:00.123Z',
    ],
    ['no seconds', '2030-01-01T10:00Z', '2030-01-01T10:00:00.000Z'],
    ['a space separator', '2030-01-01 10:00:00Z', '2030-01-01T10:00:00.000Z'],
    ['a date only (UTC midnight)', '2030-01-01', '2030-01-01T00:00:00.000Z'],
    ['surrounding spaces', '  2030-01-01T10:00:00Z\n', '2030-01-01T10:00:00.000Z'],
    ['a leap day', '2028-02-29T00:00:00Z', '2028-02-29T00:00:00.000Z'],
  ])('reads %s', (_, input, expected) => {
    expect(parseFutureTime(input, field, now)).toBe(expected)
  })

  it('returns the toISOString() form', () => {
    const out = parseFutureTime('2030-07-04T01:02:03+01:00', field, now)
    expect(out).toBe(new Date(out).toISOString())
    expect(out).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  })

  it('reads a time without an offset as UTC, whatever the server time zone', () => {
    for (const tz of ['UTC', 'America/New_York', 'Asia/Kolkata', 'Pacific/Kiritimati']) {
      process.env.TZ = tz
      expect(parseFutureTime('2030-01-01T10:00:00', field, now)).toBe('2030-01-01T10:00:00.000Z')
      expect(parseFutureTime('2030-01-01 10:00', field, now)).toBe('2030-01-01T10:00:00.000Z')
      expect(parseFutureTime('2030-01-01', field, now)).toBe('2030-01-01T00:00:00.000Z')
    }
  })

  it('accepts one millisecond after now', () => {
    const next = new Date(now.getTime() + 1).toISOString()
    expect(parseFutureTime(next, field, now)).toBe(next)
  })

  it.each([
    ['now', '2025-06-01T12:00:00.000Z'],
    ['now, written with an offset', '2025-06-01T14:00:00+02:00'],
    ['one millisecond ago', '2025-06-01T11:59:59.999Z'],
    ['last year', '2024-06-01T12:00:00Z'],
    ['today (date only, midnight passed)', '2025-06-01'],
    ['the epoch', '1970-01-01T00:00:00Z'],
  ])('rejects %s as not in the future', (_, input) => {
    expectInvalidField(() => parseFutureTime(input, field, now), field, 'must be in the future')
  })

  it.each([
    ['empty text', ''],
    ['blank text', '   '],
    ['a word', 'tomorrow'],
    ['epoch seconds', '1893456000'],
    ['an RFC 2822 date', 'Tue, 01 Jan 2030 10:00:00 GMT'],
    ['a US date', '01/01/2030'],
    ['month 13', '2030-13-01'],
    ['day 0', '2030-01-00'],
    ['February 31', '2030-02-31'],
    ['February 29 of a common year', '2030-02-29T00:00:00Z'],
    ['April 31', '2030-04-31T10:00:00Z'],
    ['hour 25', '2030-01-01T25:00:00Z'],
    ['minute 60', '2030-01-01T10:60:00Z'],
    ['an offset before the time', '2030-01-01+02:00'],
    ['two zones', '2030-01-01T10:00:00+01:00Z'],
    ['a space before the zone', '2030-01-01T10:00:00 Z'],
    ['a trailing word', '2030-01-01T10:00:00Z later'],
    ['a five-digit year', '+12030-01-01T10:00:00Z'],
  ])('rejects %s', (_, input) => {
    expectInvalidField(() => parseFutureTime(input, field, now), field, 'ISO 8601')
  })

  it.each([
    ['a number', 1893456000000],
    ['a Date', new Date('2030-01-01T00:00:00Z')],
    ['null', null],
    ['undefined', undefined],
    ['an array', ['2030-01-01']],
  ])('rejects %s (not a string)', (_, input) => {
    expectInvalidField(() => parseFutureTime(input, field, now), field, 'ISO 8601')
  })

  it('round-trips any future instant given in toISOString() form', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date(now.getTime() + 1),
          max: new Date('9999-12-31T23:59:59.999Z'),
          noInvalidDate: true,
        }),
        (at) => {
          expect(parseFutureTime(at.toISOString(), field, now)).toBe(at.toISOString())
        },
      ),
    )
  })
})

describe('findMalformed', () => {
  it.each([
    ['a lone high surrogate', { a: '\ud800' }, 'a', 'well-formed'],
    ['a lone low surrogate deep in an array', { a: [1, { b: 'x\udc00' }] }, 'a.1.b', 'well-formed'],
    ['reversed surrogate pair', ['\udc00\ud800'], '0', 'well-formed'],
    ['an ill-formed name', { 'k\ud800': 1 }, '"k\\ud800"', 'name must be well-formed'],
    ['Infinity', { page: Number.POSITIVE_INFINITY }, 'page', 'finite'],
    ['-Infinity', { n: [Number.NEGATIVE_INFINITY] }, 'n.0', 'finite'],
    ['NaN', { n: Number.NaN }, 'n', 'finite'],
    [
      'the first offender in document order',
      { a: 1, b: '\ud800', c: '\ud800' },
      'b',
      'well-formed',
    ],
  ])('finds %s', (_, value, field, problem) => {
    const found = findMalformed(value, '')
    expect(found?.field).toBe(field)
    expect(found?.problem).toContain(problem)
  })

  it('names the root when the value itself is malformed, prefixed paths otherwise', () => {
    expect(findMalformed('\ud800', 'document')?.field).toBe('document')
    expect(findMalformed({ x: '\ud800' }, 'document')?.field).toBe('document.x')
    expect(findMalformed('\ud800', '')?.field).toBe('request')
  })

  it('shortens a long client-chosen path to 200 characters without splitting a pair', () => {
    const key = '😀'.repeat(300)
    const field = findMalformed({ [key]: '\ud800' }, 'document')?.field ?? ''
    expect([...field]).toHaveLength(200)
    expect(field.endsWith('…')).toBe(true)
    expect(isWellFormedText(field)).toBe(true)
  })

  it('accepts well-formed text (pairs, U+FFFD, emoji) and finite numbers', () => {
    const fine = { a: '😀', b: '\ufffd', c: [0, -0, 1e308, -1e-308], d: null, e: true }
    expect(findMalformed(fine, '')).toBeUndefined()
  })

  it('does not walk buffers or other non-plain objects', () => {
    expect(findMalformed({ b: Buffer.from([0xed, 0xa0, 0x80]) }, '')).toBeUndefined()
  })

  it('decodeBase64Json refuses what findMalformed finds, and bytes that are not UTF-8', () => {
    expectInvalidField(
      () => decodeBase64Json(Buffer.from('{"a":"\\ud800"}').toString('base64'), 'document'),
      'document.a',
      'well-formed',
    )
    expectInvalidField(
      () => decodeBase64Json(Buffer.from('[1e400]').toString('base64'), 'document'),
      'document.0',
      'finite',
    )
    expectInvalidField(
      () => decodeBase64Json(Buffer.from([0x22, 0xff, 0x22]).toString('base64'), 'document'),
      'document',
      'in UTF-8',
    )
  })
})
