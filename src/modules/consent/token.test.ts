import { createHmac, createSecretKey } from 'node:crypto'
import { jwtVerify, SignJWT } from 'jose'
import { describe, expect, it } from 'vitest'
import { ConsentTokens } from './token.js'

const key = createSecretKey(Buffer.from('a consent secret of at least 32 characters'))
const tokens = new ConsentTokens(key)
const claims = {
  consumerIdentifier: 'ada@example.com',
  consumerPartition: 'shop.example',
  iat: 1_790_000_000,
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
/** A token signed by hand (HS256 over header.payload), to forge exactly what we want. */
function handMade(
  header: object,
  payload: object,
  secret: Buffer | string = 'a consent secret of at least 32 characters',
) {
  const body = `${b64(header)}.${b64(payload)}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

describe('consent tokens', () => {
  it('are HS256 JWTs with exactly the spec’s claims and no exp', async () => {
    const token = tokens.sign(claims)
    const [header, payload] = token
      .split('.')
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()))
    expect(header).toEqual({ alg: 'HS256', typ: 'JWT' })
    expect(payload).toEqual(claims)
    expect(await tokens.verify(token)).toEqual(claims)
    // jose itself accepts it, and it is jose's own encoding byte for byte.
    expect((await jwtVerify(token, key, { algorithms: ['HS256'] })).payload).toEqual(claims)
    const byJose = await new SignJWT({
      consumerIdentifier: claims.consumerIdentifier,
      consumerPartition: claims.consumerPartition,
    })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuedAt(claims.iat)
      .sign(key)
    expect(token).toBe(byJose)
  })

  it('sign claims with any characters and verify them back', async () => {
    for (const consumerIdentifier of ['1', 'josé@exämple.de', 'a"b\\c', '😀', 'x'.repeat(100)]) {
      const c = { consumerIdentifier, consumerPartition: 'p/ü', iat: 0 }
      expect(await tokens.verify(tokens.sign(c))).toEqual(c)
    }
  })

  it('verify a token made by an independent HS256 implementation with the same key', async () => {
    expect(await tokens.verify(handMade({ alg: 'HS256', typ: 'JWT' }, claims))).toEqual(claims)
  })

  it('refuse a token signed with another key', async () => {
    const other = new ConsentTokens(
      createSecretKey(Buffer.from('another secret of at least 32 characters!')),
    )
    expect(await tokens.verify(other.sign(claims))).toBeNull()
  })

  it('refuse a tampered payload or signature', async () => {
    const token = tokens.sign(claims)
    const [h, , s] = token.split('.')
    const claimsPart = (t: string) => t.split('.')[1]
    const forged = `${h}.${b64({ ...claims, consumerPartition: 'other.example' })}.${s}`
    expect(await tokens.verify(forged)).toBeNull()
    // The signature's first character (its last one carries unused padding bits).
    const flipped = `${h}.${claimsPart(token)}.${s?.[0] === 'A' ? 'B' : 'A'}${s?.slice(1)}`
    expect(await tokens.verify(flipped)).toBeNull()
  })

  it('accept only HS256: none, HS384/HS512 with the same key and a missing typ are refused', async () => {
    expect(await tokens.verify(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`)).toBeNull()
    for (const alg of ['HS384', 'HS512'] as const) {
      const token = await new SignJWT({ ...claims })
        .setProtectedHeader({ alg, typ: 'JWT' })
        .sign(key)
      expect(await tokens.verify(token)).toBeNull()
    }
    expect(await tokens.verify(handMade({ alg: 'HS256' }, claims))).toBeNull()
    expect(await tokens.verify(handMade({ alg: 'HS256', typ: 'other' }, claims))).toBeNull()
  })

  it('refuse missing or mistyped claims', async () => {
    const header = { alg: 'HS256', typ: 'JWT' }
    for (const payload of [
      { consumerPartition: 's', iat: 1 },
      { consumerIdentifier: 'a', iat: 1 },
      { consumerIdentifier: 'a', consumerPartition: 's' },
      { consumerIdentifier: '', consumerPartition: 's', iat: 1 },
      { consumerIdentifier: 'a', consumerPartition: '', iat: 1 },
      { consumerIdentifier: 1, consumerPartition: 's', iat: 1 },
      { consumerIdentifier: 'a', consumerPartition: ['s'], iat: 1 },
      { consumerIdentifier: 'a', consumerPartition: 's', iat: '1' },
      { consumerIdentifier: 'a', consumerPartition: 's', iat: 1.5 },
    ]) {
      expect(await tokens.verify(handMade(header, payload)), JSON.stringify(payload)).toBeNull()
    }
  })

  it('refuse garbage and over-long input without throwing', async () => {
    for (const token of ['', 'x', 'a.b.c', '...', `${'a'.repeat(5000)}.b.c`]) {
      expect(await tokens.verify(token)).toBeNull()
    }
  })
})
