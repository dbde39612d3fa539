import { randomBytes } from 'node:crypto'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** True for a canonical 8-4-4-4-12 hex UUID of any version (the SDK tests check this shape). */
export function isUuid(value: string): boolean {
  return UUID_RE.test(value)
}

let lastMs = -1
let last: Buffer | undefined

/**
 * UUIDv7 (RFC 9562): 48-bit millisecond timestamp then random bits, so ids made close in time
 * sit close together in B-tree indexes. Ids are always made here, never by the database.
 * Within one millisecond the next id is the previous one plus a random step (RFC 9562 §6.2,
 * method 2), so ids sort in creation order (decisions.md 13: lists are in id order).
 */
export function newId(now: number = Date.now()): string {
  let b: Buffer
  if (last !== undefined && now === lastMs) {
    b = Buffer.from(last)
    addRandomStep(b)
  } else {
    b = randomBytes(16)
    b.writeUIntBE(now, 0, 6)
    // The top random bit starts at 0: 2^73 of headroom for the steps within this millisecond.
    b[6] = 0x70 | ((b[6] as number) & 0x07)
    b[8] = 0x80 | ((b[8] as number) & 0x3f)
    lastMs = now
  }
  last = b
  const h = b.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/** Adds 1 to 2^32 to the 74 random bits (bytes 6 to 15 less the version and variant bits). */
function addRandomStep(b: Buffer): void {
  let carry = randomBytes(4).readUInt32BE(0) + 1
  for (let i = 15; i >= 6 && carry > 0; i--) {
    // Bits of byte i that are random: the version nibble (6) and variant bits (8) stay.
    const mask = i === 6 ? 0x0f : i === 8 ? 0x3f : 0xff
    const sum = ((b[i] as number) & mask) + carry
    b[i] = ((b[i] as number) & ~mask & 0xff) | (sum & mask)
    carry = Math.floor(sum / (mask + 1))
  }
}
