import { createCipheriv, createDecipheriv } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import { IntegrityError, KEY_BYTES, TAG_BYTES } from './aead.js'

/**
 * Chunked authenticated encryption for BLOB content, so uploads and downloads stream (the STREAM
 * construction of Hoang, Reyhanitabar, Rogaway and Vizár): the plaintext is cut into 64 KiB
 * chunks, each sealed with AES-256-GCM under a key used for this one object only. A chunk's
 * nonce is its index (8 bytes) followed by a flag byte that marks the last chunk, so chunks
 * cannot be reordered, dropped or cut off at the end without failing authentication.
 */
export const CHUNK_BYTES = 64 * 1024
/** A sealed chunk's size (every chunk but the last is exactly this long). */
export const SEALED_CHUNK_BYTES = CHUNK_BYTES + TAG_BYTES

function nonce(index: number, last: boolean): Buffer {
  const n = Buffer.alloc(12)
  n.writeBigUInt64BE(BigInt(index), 3)
  n[11] = last ? 1 : 0
  return n
}

/** Seals chunk `index` of a stream (`last`: the final one); exported with `openChunk`. */
export function sealChunk(key: Buffer, index: number, last: boolean, plain: Buffer): Buffer {
  const cipher = createCipheriv('aes-256-gcm', key, nonce(index, last))
  const body = Buffer.concat([cipher.update(plain), cipher.final()])
  return Buffer.concat([body, cipher.getAuthTag()])
}

/**
 * Opens chunk `index` of a stream (`last`: no chunk follows), or throws IntegrityError. Exported
 * for readers that cut the chunks themselves (backups name the chunk that fails).
 */
export function openChunk(key: Buffer, index: number, last: boolean, sealed: Buffer): Buffer {
  if (sealed.length < TAG_BYTES) throw new IntegrityError('stored content is truncated')
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce(index, last))
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
    return Buffer.concat([
      decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)),
      decipher.final(),
    ])
  } catch {
    throw new IntegrityError('stored content failed its integrity check')
  }
}

function assertKey(key: Buffer): void {
  if (key.length !== KEY_BYTES) throw new Error('stream key must be 32 bytes')
}

/**
 * Buffers input into fixed-size pieces and hands each to `emit`; the last piece (possibly empty
 * or full-size) is handed over at the end with `last = true`.
 */
class Chunker extends Transform {
  #pending: Buffer[] = []
  #size = 0
  #index = 0

  constructor(
    private readonly chunkSize: number,
    private readonly seal: (index: number, last: boolean, piece: Buffer) => Buffer,
  ) {
    super()
  }

  override _transform(data: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.#pending.push(data)
    this.#size += data.length
    try {
      // Hold back at least one byte: only the end of the stream says which chunk is last.
      while (this.#size > this.chunkSize) {
        const all =
          this.#pending.length === 1 ? (this.#pending[0] as Buffer) : Buffer.concat(this.#pending)
        this.push(this.seal(this.#index++, false, all.subarray(0, this.chunkSize)))
        const rest = all.subarray(this.chunkSize)
        this.#pending = [rest]
        this.#size = rest.length
      }
      done()
    } catch (error) {
      done(error as Error)
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      this.push(this.seal(this.#index++, true, Buffer.concat(this.#pending)))
      done()
    } catch (error) {
      done(error as Error)
    }
  }
}

export function encryptStream(key: Buffer): Transform {
  assertKey(key)
  return new Chunker(CHUNK_BYTES, (i, last, piece) => sealChunk(key, i, last, piece))
}

/** Emits only authenticated plaintext; errors with IntegrityError on any tampering. */
export function decryptStream(key: Buffer): Transform {
  assertKey(key)
  return new Chunker(SEALED_CHUNK_BYTES, (i, last, piece) => openChunk(key, i, last, piece))
}

/** Stored size of `plainSize` bytes of content. */
export function encryptedSize(plainSize: number): number {
  const chunks = Math.max(1, Math.ceil(plainSize / CHUNK_BYTES))
  return plainSize + chunks * TAG_BYTES
}
