import { randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import { IntegrityError, KEY_BYTES } from './aead.js'
import { MasterKey } from './master-key.js'

describe('MasterKey.fromBase64', () => {
  it('accepts the base64 of 32 bytes, with or without its one "=" and surrounding whitespace', () => {
    const bytes = randomBytes(KEY_BYTES)
    const text = bytes.toString('base64')
    expect(text).toMatch(/^[A-Za-z0-9+/]{43}=$/)
    const a = MasterKey.fromBase64(text)
    const b = MasterKey.fromBase64(text.slice(0, 43))
    // a key file ends with a newline; an env value may carry spaces
    const c = MasterKey.fromBase64(`  ${text}\n`)
    expect(a.toBase64()).toBe(text)
    expect(b.toBase64()).toBe(text)
    expect(c.toBase64()).toBe(text)
    expect(new Set([a.id, b.id, c.id]).size).toBe(1)
  })

  it('refuses wrong lengths, wrong alphabets and junk with a configuration message', () => {
    const good = randomBytes(KEY_BYTES).toString('base64')
    const bad = [
      '',
      ' ',
      good.slice(0, 42),
      `${good.slice(0, 42)}=`,
      `${good.slice(0, 43)}==`,
      `${good.slice(0, 43)}A`,
      `${good}A`,
      good + good,
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      randomBytes(16).toString('base64'),
      randomBytes(64).toString('base64'),
      randomBytes(KEY_BYTES).toString('hex'),
      randomBytes(KEY_BYTES).toString('base64url').replace(/^./, '-'),
      `${good.slice(0, 20)} ${good.slice(21)}`,
      `${good.slice(0, 20)}\n${good.slice(21)}`,
      `${good.slice(0, 42)}!`,
      `${good.slice(0, 42)}\u00e9`,
    ]
    for (const text of bad) {
      expect(() => MasterKey.fromBase64(text), JSON.stringify(text)).toThrow(
        'a master key must be the base64 of exactly 32 bytes',
      )
    }
  })
})

describe('MasterKey.id', () => {
  it('is a stable 16-hex fingerprint, different per key, that does not reveal the key', () => {
    const key = MasterKey.generate()
    expect(key.id).toMatch(/^[0-9a-f]{16}$/)
    expect(MasterKey.fromBase64(key.toBase64()).id).toBe(key.id)
    const hex = Buffer.from(key.toBase64(), 'base64').toString('hex')
    expect(hex.includes(key.id)).toBe(false)
    const ids = new Set<string>()
    for (let i = 0; i < 1000; i++) ids.add(MasterKey.generate().id)
    expect(ids.size).toBe(1000)
  })

  it('generate() makes a fresh 32-byte key each time', () => {
    const a = MasterKey.generate()
    const b = MasterKey.generate()
    expect(Buffer.from(a.toBase64(), 'base64').length).toBe(KEY_BYTES)
    expect(a.toBase64()).not.toBe(b.toBase64())
    expect(a.id).not.toBe(b.id)
  })

  it('never shows the key when logged or serialized', () => {
    const key = MasterKey.generate()
    const secret = key.toBase64()
    const hex = Buffer.from(secret, 'base64').toString('hex')
    for (const shown of [JSON.stringify(key), inspect(key, { depth: 5 }), String(key)]) {
      expect(shown).not.toContain(secret.slice(0, 20))
      expect(shown).not.toContain(hex.slice(0, 20))
    }
  })
})

describe('MasterKey.wrap / unwrap', () => {
  const context = 'account-1\nkey-1'

  it('round-trips a data key under the same context', () => {
    const master = MasterKey.generate()
    const dataKey = randomBytes(KEY_BYTES)
    const wrapped = master.wrap(dataKey, context)
    expect(wrapped).not.toContain(dataKey.toString('base64'))
    expect(master.unwrap(wrapped, context).equals(dataKey)).toBe(true)
    // a key re-parsed from its text (another process) unwraps too
    expect(MasterKey.fromBase64(master.toBase64()).unwrap(wrapped, context).equals(dataKey)).toBe(
      true,
    )
  })

  it('wraps the same data key differently each time', () => {
    const master = MasterKey.generate()
    const dataKey = randomBytes(KEY_BYTES)
    expect(master.wrap(dataKey, context)).not.toBe(master.wrap(dataKey, context))
  })

  it('fails closed under another context: a wrapped key cannot move to another account or id', () => {
    const master = MasterKey.generate()
    const wrapped = master.wrap(randomBytes(KEY_BYTES), context)
    for (const other of ['account-2\nkey-1', 'account-1\nkey-2', 'account-1\nkey-1 ', '']) {
      expect(() => master.unwrap(wrapped, other)).toThrow(IntegrityError)
    }
  })

  it('fails closed under another master key', () => {
    const wrapped = MasterKey.generate().wrap(randomBytes(KEY_BYTES), context)
    expect(() => MasterKey.generate().unwrap(wrapped, context)).toThrow(IntegrityError)
  })

  it('fails closed when any byte of the wrapped key is flipped', () => {
    const master = MasterKey.generate()
    const raw = Buffer.from(master.wrap(randomBytes(KEY_BYTES), context), 'base64')
    for (let i = 0; i < raw.length; i++) {
      const tampered = Buffer.from(raw)
      tampered[i] = (tampered[i] as number) ^ 0x01
      expect(() => master.unwrap(tampered.toString('base64'), context)).toThrow(IntegrityError)
    }
    expect(() => master.unwrap('', context)).toThrow(IntegrityError)
  })

  it('fails closed on every single-character change of the stored wrapped text', () => {
    const master = MasterKey.generate()
    const wrapped = master.wrap(randomBytes(KEY_BYTES), context)
    // 12 + 32 + 16 = 60 bytes: 80 characters, the last ones carrying no padding
    for (let i = 0; i < wrapped.length; i++) {
      for (const c of 'AQgw+/=.!\n ') {
        if (c === wrapped[i]) continue
        const tampered = wrapped.slice(0, i) + c + wrapped.slice(i + 1)
        expect(() => master.unwrap(tampered, context)).toThrow(IntegrityError)
      }
    }
    for (const extra of ['=', '==', '\n', ' ', '!']) {
      expect(() => master.unwrap(wrapped + extra, context)).toThrow(IntegrityError)
    }
  })
})
