import { hash, verify } from '@node-rs/argon2'

/** `Algorithm.Argon2id` of @node-rs/argon2 (a const enum, which isolated modules cannot read). */
const ARGON2ID = 2

/**
 * argon2id with the OWASP parameters (m = 19 MiB, t = 2, p = 1). @node-rs/argon2 runs on libuv's
 * thread pool, so hashing never blocks the event loop and at most four hashes run at once.
 */
export interface PasswordHasherOptions {
  memoryCost: number
  timeCost: number
}

export const OWASP_ARGON2: PasswordHasherOptions = { memoryCost: 19_456, timeCost: 2 }

export class PasswordHasher {
  readonly #options: PasswordHasherOptions
  #dummy: Promise<string> | undefined

  constructor(options: PasswordHasherOptions = OWASP_ARGON2) {
    this.#options = options
  }

  hash(password: string): Promise<string> {
    return hash(password, {
      algorithm: ARGON2ID,
      memoryCost: this.#options.memoryCost,
      timeCost: this.#options.timeCost,
      parallelism: 1,
    })
  }

  /** Verifies a password; a missing hash still costs one full verification (no timing oracle). */
  async verify(storedHash: string | null | undefined, password: string): Promise<boolean> {
    if (!storedHash) {
      this.#dummy ??= this.hash('coffer-dummy-password')
      await verify(await this.#dummy, password).catch(() => false)
      return false
    }
    try {
      return await verify(storedHash, password)
    } catch {
      return false
    }
  }
}
