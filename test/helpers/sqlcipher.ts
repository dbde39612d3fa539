import { createDecipheriv, createHmac, pbkdf2Sync, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'

/**
 * An independent reader of the SQLCipher 4 page format, written from SQLCipher's documented
 * design (https://www.zetetic.net/sqlcipher/design/) with nothing but Node's crypto — so a test
 * can show that the embedded database is the standard format (decisions.md 226) and not merely
 * something SQLite3MultipleCiphers reads back, and can see what someone holding the file key
 * sees (the decrypted pages).
 *
 * SQLCipher 4 defaults: 4096-byte pages; the file's first 16 bytes are the salt; each page's last
 * 80 bytes are the AES-256-CBC IV (16) and an HMAC-SHA512 (64) over the encrypted bytes, the IV
 * and the page number (4 bytes, little-endian); the HMAC key is PBKDF2-HMAC-SHA512 of the
 * encryption key over the salt XOR 0x3a, 2 iterations. A raw key (`x'…'`) is the encryption key
 * itself (no KDF).
 */
const PAGE = 4096
const SALT = 16
const IV = 16
const HMAC = 64
const RESERVE = IV + HMAC
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1')

export class SqlcipherPageError extends Error {}

/**
 * Decrypts every page of an encrypted database file into a plaintext SQLite image (a file stock
 * SQLite opens). Throws SqlcipherPageError when a page's HMAC does not verify.
 */
export function decryptSqlcipherFile(file: string, key: Buffer): Buffer {
  const bytes = readFileSync(file)
  if (bytes.length % PAGE !== 0) throw new SqlcipherPageError('not a whole number of pages')
  const salt = bytes.subarray(0, SALT)
  const hmacSalt = Buffer.from(salt.map((b) => b ^ 0x3a))
  const hmacKey = pbkdf2Sync(key, hmacSalt, 2, 32, 'sha512')
  const out = Buffer.alloc(bytes.length)
  for (let n = 1; n * PAGE <= bytes.length; n++) {
    const page = bytes.subarray((n - 1) * PAGE, n * PAGE)
    out.set(decryptPage(page, n, key, hmacKey), (n - 1) * PAGE)
  }
  return out
}

function decryptPage(page: Buffer, pgno: number, key: Buffer, hmacKey: Buffer): Buffer {
  const offset = pgno === 1 ? SALT : 0
  const end = PAGE - RESERVE
  const cipherText = page.subarray(offset, end)
  const iv = page.subarray(end, end + IV)
  const stored = page.subarray(end + IV, end + IV + HMAC)
  const number = Buffer.alloc(4)
  number.writeUInt32LE(pgno)
  const mac = createHmac('sha512', hmacKey)
    .update(page.subarray(offset, end + IV))
    .update(number)
    .digest()
  if (!timingSafeEqual(mac, stored)) throw new SqlcipherPageError(`page ${pgno}: HMAC mismatch`)
  const decipher = createDecipheriv('aes-256-cbc', key, iv).setAutoPadding(false)
  const plain = Buffer.concat([decipher.update(cipherText), decipher.final()])
  const out = Buffer.alloc(PAGE)
  if (pgno === 1) SQLITE_HEADER.copy(out, 0)
  plain.copy(out, offset)
  return out
}
