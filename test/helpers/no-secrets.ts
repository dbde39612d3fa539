import type { LightMyRequestResponse } from 'fastify'
import { expect } from 'vitest'

/** No key of the body names a hash, digest, password or secret, and no given password leaks. */
export function expectNoSecrets(res: LightMyRequestResponse, ...passwords: string[]): void {
  for (const p of passwords) expect(res.body).not.toContain(p)
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk)
    else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        expect(k).not.toMatch(/password|hash|digest|secret/i)
        walk(v)
      }
    }
  }
  walk(res.json())
}
