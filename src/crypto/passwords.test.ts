import { beforeAll, describe, expect, it } from 'vitest'
import { OWASP_ARGON2, PasswordHasher } from './passwords.js'

/** `$argon2id$v=19$m=…,t=…,p=…$<salt>$<hash>`, salt and hash in unpadded standard base64. */
const PHC = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/

function parsePhc(phc: string) {
  const m = PHC.exec(phc)
  if (!m) throw new Error(`not an argon2id PHC string: ${phc}`)
  return {
    m: Number(m[1]),
    t: Number(m[2]),
    p: Number(m[3]),
    salt: Buffer.from(m[4] as string, 'base64'),
    hash: Buffer.from(m[5] as string, 'base64'),
  }
}

// 128 characters, mixed case, digits, punctuation and non-ASCII (verified exactly as typed).
const PASSWORD = `Correct-Horse_Battery staple ÄÖü 🔑 ${'aB3$'.repeat(30)}`.slice(0, 128)

describe('PasswordHasher with the OWASP parameters', () => {
  const hasher = new PasswordHasher(OWASP_ARGON2)
  let first = ''
  let second = ''

  // Only two real-parameter hashes (plus the one dummy hash); each takes ~30 ms.
  beforeAll(async () => {
    ;[first, second] = await Promise.all([hasher.hash(PASSWORD), hasher.hash(PASSWORD)])
  })

  it('uses at least the R-12 bar: argon2id, m ≥ 19456 KiB, t ≥ 2', () => {
    expect(OWASP_ARGON2.memoryCost).toBeGreaterThanOrEqual(19_456)
    expect(OWASP_ARGON2.timeCost).toBeGreaterThanOrEqual(2)
  })

  it('has a 128-character test password with a character 100 to change', () => {
    expect(PASSWORD).toHaveLength(128)
    expect(PASSWORD[100]).toMatch(/[a-zA-Z0-9$]/)
  })

  it('produces a PHC string $argon2id$v=19$m=19456,t=2,p=1$…', () => {
    expect(first.startsWith('$argon2id$v=19$m=19456,t=2,p=1$')).toBe(true)
    const phc = parsePhc(first)
    expect(phc).toMatchObject({ m: 19_456, t: 2, p: 1 })
    expect(phc.hash.length).toBeGreaterThanOrEqual(32)
  })

  it('never contains the password', () => {
    expect(first).not.toContain(PASSWORD)
    expect(first).not.toContain(PASSWORD.slice(0, 16))
    expect(first).not.toContain(Buffer.from(PASSWORD).toString('base64').slice(0, 16))
  })

  it('salts each hash uniquely with at least 16 bytes', () => {
    expect(first).not.toBe(second)
    const a = parsePhc(first)
    const b = parsePhc(second)
    expect(a.salt.length).toBeGreaterThanOrEqual(16)
    expect(b.salt.length).toBeGreaterThanOrEqual(16)
    expect(a.salt.equals(b.salt)).toBe(false)
    expect(a.hash.equals(b.hash)).toBe(false)
  })

  it('verifies the right password against either hash', async () => {
    await expect(hasher.verify(first, PASSWORD)).resolves.toBe(true)
    await expect(hasher.verify(second, PASSWORD)).resolves.toBe(true)
  })

  it('is the default', async () => {
    await expect(new PasswordHasher().verify(first, PASSWORD)).resolves.toBe(true)
  })

  it('rejects a wrong password', async () => {
    await expect(hasher.verify(first, 'wrong password')).resolves.toBe(false)
    await expect(hasher.verify(first, '')).resolves.toBe(false)
  })

  it('rejects a password differing only at character 100', async () => {
    const changed = `${PASSWORD.slice(0, 100)}${PASSWORD[100] === 'x' ? 'y' : 'x'}${PASSWORD.slice(101)}`
    expect(changed).toHaveLength(128)
    expect(changed).not.toBe(PASSWORD)
    await expect(hasher.verify(first, changed)).resolves.toBe(false)
  })

  it('does not truncate: a prefix or an extension of the password fails', async () => {
    await expect(hasher.verify(first, PASSWORD.slice(0, 64))).resolves.toBe(false)
    await expect(hasher.verify(first, PASSWORD.slice(0, 127))).resolves.toBe(false)
    await expect(hasher.verify(first, `${PASSWORD}a`)).resolves.toBe(false)
    await expect(hasher.verify(first, ` ${PASSWORD}`)).resolves.toBe(false)
  })

  it('does not fold case', async () => {
    await expect(hasher.verify(first, PASSWORD.toUpperCase())).resolves.toBe(false)
    await expect(hasher.verify(first, PASSWORD.toLowerCase())).resolves.toBe(false)
    const swapped = `${PASSWORD[0]?.toLowerCase()}${PASSWORD.slice(1)}`
    expect(swapped).not.toBe(PASSWORD)
    await expect(hasher.verify(first, swapped)).resolves.toBe(false)
  })

  it('does not normalize Unicode', async () => {
    const decomposed = PASSWORD.normalize('NFD')
    expect(decomposed).not.toBe(PASSWORD)
    await expect(hasher.verify(first, decomposed)).resolves.toBe(false)
  })

  it('returns false for a missing hash (after a dummy verification)', async () => {
    await expect(hasher.verify(null, PASSWORD)).resolves.toBe(false)
    await expect(hasher.verify(undefined, PASSWORD)).resolves.toBe(false)
    await expect(hasher.verify('', PASSWORD)).resolves.toBe(false)
    // Not even the dummy password gets in.
    await expect(hasher.verify(null, 'coffer-dummy-password')).resolves.toBe(false)
  })

  it.each([
    ['garbage', 'not a hash'],
    ['an empty PHC', '$argon2id$'],
    ['a PHC without salt and hash', '$argon2id$v=19$m=19456,t=2,p=1$'],
    ['a bcrypt hash', '$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy'],
    ['a bare SHA-256 digest', 'ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0'],
    ['an unknown algorithm', '$argon2x$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNo'],
    ['a bad version', '$argon2id$v=99$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNo'],
    ['a non-base64 salt', '$argon2id$v=19$m=19456,t=2,p=1$!!!!$aGFzaGhhc2hoYXNo'],
  ])('returns false for %s, never throws', async (_, stored) => {
    await expect(hasher.verify(stored, PASSWORD)).resolves.toBe(false)
  })

  it('returns false for a truncated or tampered real hash', async () => {
    await expect(hasher.verify(first.slice(0, -10), PASSWORD)).resolves.toBe(false)
    await expect(hasher.verify(`${first}$extra`, PASSWORD)).resolves.toBe(false)
    // A character inside the hash (the last one carries unused padding bits).
    const at = first.length - 5
    const changed = first[at] === 'A' ? 'B' : 'A'
    const tampered = `${first.slice(0, at)}${changed}${first.slice(at + 1)}`
    await expect(hasher.verify(tampered, PASSWORD)).resolves.toBe(false)
    // Someone else's salt with this hash.
    const { salt } = parsePhc(second)
    const parts = first.split('$')
    parts[4] = salt.toString('base64').replace(/=+$/, '')
    await expect(hasher.verify(parts.join('$'), PASSWORD)).resolves.toBe(false)
  })
})

describe('PasswordHasher parameters', () => {
  it('writes its parameters into the hash, and verification reads them from there', async () => {
    const cheap = new PasswordHasher({ memoryCost: 1024, timeCost: 1 })
    const stored = await cheap.hash('pw')
    expect(stored.startsWith('$argon2id$v=19$m=1024,t=1,p=1$')).toBe(true)
    // An OWASP hasher still verifies hashes made with older (other) parameters.
    await expect(new PasswordHasher().verify(stored, 'pw')).resolves.toBe(true)
    await expect(new PasswordHasher().verify(stored, 'pW')).resolves.toBe(false)
  })

  it('accepts the empty password and a 1,000-character password', async () => {
    const cheap = new PasswordHasher({ memoryCost: 1024, timeCost: 1 })
    const long = `${'x'.repeat(999)}y`
    const [empty, big] = await Promise.all([cheap.hash(''), cheap.hash(long)])
    await expect(cheap.verify(empty, '')).resolves.toBe(true)
    await expect(cheap.verify(empty, ' ')).resolves.toBe(false)
    await expect(cheap.verify(big, long)).resolves.toBe(true)
    await expect(cheap.verify(big, 'x'.repeat(1000))).resolves.toBe(false)
  })
})
