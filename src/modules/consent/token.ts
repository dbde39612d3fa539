import type { KeyObject } from 'node:crypto'
import { jwtVerify, SignJWT } from 'jose'

/**
 * The consent token (spec, Consent endpoints): an HS256 JWT with header `alg` and `typ`, claims
 * `consumerIdentifier`, `consumerPartition` and `iat` (Unix seconds), no `exp`. Only HS256 with
 * the server's key verifies: `none`, other algorithms and altered tokens are refused.
 */
export interface ConsentClaims {
  consumerIdentifier: string
  consumerPartition: string
  /** Unix seconds. */
  iat: number
}

/** Longer tokens are not even parsed (ours are a few hundred characters). */
const MAX_TOKEN_LENGTH = 4096

export class ConsentTokens {
  constructor(private readonly key: KeyObject) {}

  sign(claims: ConsentClaims): Promise<string> {
    return new SignJWT({
      consumerIdentifier: claims.consumerIdentifier,
      consumerPartition: claims.consumerPartition,
    })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuedAt(claims.iat)
      .sign(this.key)
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
