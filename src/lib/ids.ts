import { randomBytes } from 'node:crypto'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** True for a canonical 8-4-4-4-12 hex UUID of any version (the SDK tests check this shape). */
export function isUuid(value: string): boolean {
  return UUID_RE.test(value)
}

/**
 * UUIDv7 (RFC 9562): 48-bit millisecond timestamp then random bits, so ids made close in time
 * sit close together in B-tree indexes. Ids are always made here, never by the database.
 */
export function newId(now: number = Date.now()): string {
  const b = randomBytes(16)
  b.writeUIntBE(now, 0, 6)
  b[6] = 0x70 | ((b[6] as number) & 0x0f)
  b[8] = 0x80 | ((b[8] as number) & 0x3f)
  const h = b.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
