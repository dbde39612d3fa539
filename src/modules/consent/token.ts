import { createHmac, type KeyObject } from 'node:crypto'
import { jwtVerify } from 'jose'

/**
 * The consent token (spec, Consent endpoints): an HS256 JWT with header `alg` and `typ`, claims
 * `consumerIdentifier`, `consumerPartition` and `iat` (Unix seconds), no `exp`. Only HS256 with
 * the server's key verifies: `none`, other algorithms and altered tokens are refused.
 *
 * Verification is jose's (strict JWS parsing, algorithm allow-list). Signing is one HMAC here:
 * jose signs through WebCrypto on the thread pool, ~140 µs per token against ~5 µs, and every
 * GET signs one (the tests check jose verifies what this makes, and an independent HMAC).
 */
export interface ConsentClaims {
  consumerIdentifier: string
  consumerPartition: string
  /** Unix seconds. */
  iat: number
}

/** Longer tokens are not even parsed (ours are a few hundred characters). */
const MAX_TOKEN_LENGTH = 4096
const HEADER = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url')

export class ConsentTokens {
  constructor(private readonly key: KeyObject) {}

  sign(claims: ConsentClaims): string {
    const payload = Buffer.from(
      JSON.stringify({
        consumerIdentifier: claims.consumerIdentifier,
        consumerPartition: claims.consumerPartition,
        iat: claims.iat,
      }),
    ).toString('base64url')
    const input = `${HEADER}.${payload}`
    return `${input}.${createHmac('sha256', this.key).update(input).digest('base64url')}`
  }

  /** The claims of a token this server signed, or null (never throws on bad input). */
  async verify(token: string): Promise<ConsentClaims | null> {
    if (token.length > MAX_TOKEN_LENGTH) return null
    try {
      const { payload } = await jwtVerify(token, this.key, {
        algorithms: ['HS256'],
        typ: 'JWT',
      })
      const { consumerIdentifier, consumerPartition, iat } = payload
      if (
        typeof consumerIdentifier !== 'string' ||
        consumerIdentifier === '' ||
        typeof consumerPartition !== 'string' ||
        consumerPartition === '' ||
        typeof iat !== 'number' ||
        !Number.isSafeInteger(iat)
      ) {
        return null
      }
      return { consumerIdentifier, consumerPartition, iat }
    } catch {
      return null
    }
  }
}

/**
 * The partition a token claims, read without verifying it: only for counting requests against
 * a shop (consent-rate-limit.ts), never for deciding anything. Undefined when unreadable.
 */
export function partitionClaim(token: string): string | undefined {
  if (token.length > MAX_TOKEN_LENGTH) return undefined
  const payload = token.split('.')[1]
  if (payload === undefined) return undefined
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))
    const partition = (claims as { consumerPartition?: unknown } | null)?.consumerPartition
    return typeof partition === 'string' ? partition : undefined
  } catch {
    return undefined
  }
}
